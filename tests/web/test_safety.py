"""Text from a person or a model is shown as text: no HTML from either ever runs.
And the Markdown renderer builds what it should."""
import pytest

from tests.web.pages import ChatPage, expect, saved_run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HOSTILE = ('<script>window.__pwned = "script"</script> <img src=x onerror="window.__pwned = \'img\'"> '
           '[x](javascript:window.__pwned=1) **still text**')


def test_user_text_with_script_and_img_renders_as_text(chat_page: ChatPage):
    page = chat_page.page
    chat_page.send(HOSTILE)
    run_id = chat_page.latest_run_id()
    chat_page.wait_settled(run_id)
    assert saved_run(run_id).user_message.content == HOSTILE

    for _ in range(2):  # as sent, then as the server renders it after a reload
        expect(page.locator(".msg-user .bubble")).to_have_text(HOSTILE)
        assert page.evaluate("() => window.__pwned") is None
        assert page.locator("#thread img, #thread script, #thread a[href^='javascript']").count() == 0
        page.reload()
        page.wait_for_function("() => window.ChatUI && ChatUI.replies")
    page.wait_for_timeout(200)
    assert page.evaluate("() => window.__pwned") is None


CRAFTED = """# Title <img src=x onerror="window.__pwned='h1'">
<script>window.__pwned = 'block'</script>
Some <b>bold</b> and <img src=x onerror="window.__pwned='inline'"> text, [bad](javascript:window.__pwned='link')
and [data](data:text/html,<script>alert(1)</script>) and [good](https://example.com/a?b=1&c=2).

```html
<script>window.__pwned = 'code'</script>
```

- item with *em* and `<code>`
- [x](JAVASCRIPT:alert(1))
"""


def test_model_text_is_rendered_as_safe_markdown(chat_page: ChatPage):
    page = chat_page.page
    result = page.evaluate("""text => {
        const box = document.createElement('div');
        box.id = 'crafted';
        box.append(ChatUI.markdown.render(text));
        document.body.append(box);
        return {
            dangerous: box.querySelectorAll('script, img, iframe, object, embed, style, [onerror], [onclick]').length,
            links: [...box.querySelectorAll('a')].map(a => a.getAttribute('href')),
            h1: box.querySelector('h1').textContent,
            code: box.querySelector('.code-block code').textContent,
            em: box.querySelector('li em').textContent,
            inlineCode: box.querySelector('li code').textContent,
        };
    }""", CRAFTED)
    page.wait_for_timeout(300)  # an <img onerror> would have fired by now
    assert page.evaluate("() => window.__pwned") is None
    assert result["dangerous"] == 0
    assert result["links"] == ["https://example.com/a?b=1&c=2"]
    assert result["h1"] == "Title <img src=x onerror=\"window.__pwned='h1'\">"
    assert result["code"] == "<script>window.__pwned = 'code'</script>"
    assert result["em"] == "em" and result["inlineCode"] == "<code>"


CASES = [
    ("**a** and *b* and ~~c~~", "<p><strong>a</strong> and <em>b</em> and <s>c</s></p>"),
    ("one\ntwo", "<p>one<br>two</p>"),
    ("para one\n\npara two", "<p>para one</p><p>para two</p>"),
    ("## Heading ##", "<h2>Heading</h2>"),
    ("- x\n- y", "<ul><li>x</li><li>y</li></ul>"),
    ("3. x\n4. y", '<ol start="3"><li>x</li><li>y</li></ol>'),
    ("- a\n  - b\n- c", "<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>"),
    ("Intro:\n- a", "<p>Intro:</p><ul><li>a</li></ul>"),
    ("> quoted *x*", "<blockquote><p>quoted <em>x</em></p></blockquote>"),
    ("snake_case_name and 2*3*4", "<p>snake_case_name and 2<em>3</em>4</p>"),
    ("`a*b*c` and ``x ` y``", "<p><code>a*b*c</code> and <code>x ` y</code></p>"),
    ("*a **b** c*", "<p><em>a <strong>b</strong> c</em></p>"),
    ("**unclosed", "<p>**unclosed</p>"),
    ("\\*literal\\*", "<p>*literal*</p>"),
    ("see https://example.com/x.", '<p>see <a href="https://example.com/x" target="_blank" '
                                    'rel="noopener noreferrer nofollow">https://example.com/x</a>.</p>'),
    ("[t](ftp://x)", "<p>[t](ftp://x)</p>"),
    ("[m](mailto:a@b.c) and [j](javascript:alert(1))", "<p>[m](mailto:a@b.c) and [j](javascript:alert(1))</p>"),
    ("<b>x</b> &lt;", "<p>&lt;b&gt;x&lt;/b&gt; &lt;</p>"),
    ("![x](https://example.com/a.png)", '<p>!<a href="https://example.com/a.png" target="_blank" '
                                        'rel="noopener noreferrer nofollow">x</a></p>'),  # never an <img>
    ("---", "<hr>"),
    ("| a | b |\n|---|--:|\n| 1 | 2 |", '<div class="table-wrap"><table><thead><tr><th>a</th><th>b</th></tr></thead>'
                                        "<tbody><tr><td>1</td><td>2</td></tr></tbody></table></div>"),
    ("costs $5 and $10", "<p>costs $5 and $10</p>"),
]

# The page's renderer: the vendored libraries, then ours (as templates/web/chat.html loads them).
RENDERER = ["vendor/markdown-it/markdown-it.min.js", "vendor/dompurify/purify.min.js",
            "vendor/highlightjs/highlight.min.js", "js/markdown-math.js", "js/markdown.js"]


def _load_renderer(page, live_url):
    page.goto(live_url + "/login/")
    for name in RENDERER:
        page.add_script_tag(url=f"{live_url}/static/{name}")


def test_markdown_renderer_builds_the_expected_elements(browser, live_url):
    page = browser.new_page()
    _load_renderer(page, live_url)
    got = page.evaluate("""cases => cases.map(src => {
        const box = document.createElement('div');
        box.append(ChatUI.markdown.render(src));
        return box.innerHTML.replace(/\\n/g, ''); })""", [src for src, _ in CASES])
    page.close()
    assert dict(zip([s for s, _ in CASES], got)) == dict(CASES)


def test_code_blocks_while_streaming_and_when_done(browser, live_url):
    page = browser.new_page()
    _load_renderer(page, live_url)
    out = page.evaluate("""() => {
        const render = (s) => { const d = document.createElement('div'); d.append(ChatUI.markdown.render(s)); return d; };
        const open = render('Look:\\n```python\\ndef f():\\n    return 1');
        const done = render('~~~\\n<b>&\\n~~~\\nafter');
        return {
            openCode: open.querySelector('pre code').textContent,
            openLang: open.querySelector('.code-lang').textContent,
            copyLabel: open.querySelector('button.code-copy').getAttribute('aria-label'),
            doneCode: done.querySelector('pre code').textContent,
            after: done.querySelector('p').textContent,
        }; }""")
    page.close()
    assert out == {"openCode": "def f():\n    return 1", "openLang": "python", "copyLabel": "Copy python code",
                   "doneCode": "<b>&", "after": "after"}
