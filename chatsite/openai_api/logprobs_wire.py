"""Log probabilities in OpenAI's two shapes, from what a run's stream and its saved
row hold: one [token, logprob, [[alt, logprob], ...]] per token, alternatives most
likely first (see chatsite.runs.stream.codec).

`bytes` is the UTF-8 of the token's text as the engine decoded it: a token that is
part of a multi-byte character decodes to U+FFFD, so its bytes are those of U+FFFD,
not the raw piece of the character."""


def asked(run) -> bool:
    """Whether the run was asked for log probabilities."""
    return run.sampling.get("logprobs") is not None


def _token(token: str, logprob: float) -> dict:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8", "surrogatepass"))}


def chat(items) -> dict:
    """choices[i].logprobs of a chat completion (or of one chunk: its delta's tokens)."""
    content = []
    for token, logprob, top in items or ():
        content.append({**_token(token, logprob), "top_logprobs": [_token(t, lp) for t, lp in top]})
    return {"content": content, "refusal": None}


def text(items, *, offset: int = 0) -> dict:
    """choices[i].logprobs of a text completion (or of one chunk), in OpenAI's legacy
    shape. `text_offset` counts characters into the completion's text (the prompt is
    not echoed), from `offset`: the characters earlier chunks carried."""
    tokens, token_logprobs, top_logprobs, text_offset = [], [], [], []
    for token, logprob, top in items or ():
        tokens.append(token)
        token_logprobs.append(logprob)
        top_logprobs.append({t: lp for t, lp in top})
        text_offset.append(offset)
        offset += len(token)
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs,
            "text_offset": text_offset}
