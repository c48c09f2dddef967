"""The shipped tool template for SmolLM2: without tools it renders exactly what the
model's own template renders; with tools, calls and results it renders them in the
Hermes format, through inference.prompt.assemble as the worker builds prompts."""
import json

import pytest
from django.conf import settings

from inference import chat_templates
from inference.prompt import assemble

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
ROUND_TRIP = [{"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": "",
               "tool_calls": [{"id": "call_1", "type": "function",
                               "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
              {"role": "tool", "tool_call_id": "call_1", "content": "{\"sky\": \"clear\"}"}]


@pytest.fixture(scope="module")
def tokenizer():
    folder = settings.CHATSITE["DEMO_MODELS_DIR"] / "smollm2-135m-instruct"
    if not (folder / "tokenizer.json").is_file():
        pytest.skip("the real model is not built here (scripts/setup.sh builds it)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


@pytest.fixture(scope="module")
def template():
    return chat_templates.read(chat_templates.SMOLLM2_TOOLS)


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
     {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "And?"}],
], ids=["no system", "system and turns"])
def test_without_tools_it_renders_what_the_models_own_template_renders(tokenizer, template, messages):
    own = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False,
                                         chat_template=template) == own


def test_tools_calls_and_results_reach_the_prompt_in_the_hermes_format(tokenizer, template):
    plan = assemble(tokenizer, [{"role": "system", "content": "Be brief."}, *ROUND_TRIP], max_prompt_tokens=4000,
                    chat_template=template, tools=TOOLS)
    text = tokenizer.decode(plan.token_ids)
    assert text.startswith("<|im_start|>system\nBe brief.\n\nYou have access to the following tools:\n<tools>\n")
    assert json.dumps(TOOLS[0], ensure_ascii=False) in text
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
            "</tool_call><|im_end|>\n") in text
    assert text.endswith('<|im_start|>user\n<tool_response>\n{"sky": "clear"}\n</tool_response><|im_end|>\n'
                         "<|im_start|>assistant\n")
    assert text.count("<|im_start|>system") == 1


def test_with_tools_and_no_system_message_the_default_one_carries_them(tokenizer, template):
    text = tokenizer.apply_chat_template(ROUND_TRIP[:1], tools=TOOLS, chat_template=template,
                                         add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                           "Face\n\nYou have access to the following tools:")
    assert text.endswith("<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n")


def test_a_template_that_cannot_be_read_is_refused_by_name(tmp_path):
    with pytest.raises(chat_templates.ChatTemplateError, match="nope.jinja"):
        chat_templates.read("nope.jinja")
    (tmp_path / "t.txt").write_text("x")
    with pytest.raises(chat_templates.ChatTemplateError, match="not a .jinja file"):
        chat_templates.read(str(tmp_path / "t.txt"))
