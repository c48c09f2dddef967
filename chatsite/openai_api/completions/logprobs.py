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


def prompt_text_logprobs(items, first, *, as_ids: bool = False) -> dict:
    """A prompt's log probabilities in the legacy shape, for `echo` (what scoring harnesses
    read): the first token's own figure and alternatives are null, as it has no context.
    `items`: the run's prompt logprobs (None, then [id, token, logprob, rank, [[id, token,
    logprob], ...]] each); `first`: the first token's [id, token]."""
    tokens, token_logprobs, top_logprobs, text_offset, offset = [], [], [], [], 0
    for item in items or ():
        if item is None:
            token_id, token = first or (0, "")
            token_logprobs.append(None)
            top_logprobs.append(None)
        else:
            token_id, token, logprob, _rank, top = item
            token_logprobs.append(logprob)
            top_logprobs.append({(f"token_id:{t}" if as_ids else text): lp for t, text, lp in top})
        tokens.append(f"token_id:{token_id}" if as_ids else token)
        text_offset.append(offset)
        offset += len(token)
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top_logprobs,
            "text_offset": text_offset}


def joined(first: dict, then: dict) -> dict:
    """Two legacy logprobs objects, the second after the first (its offsets as they are)."""
    return {key: first[key] + then[key] for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset")}


def vllm_prompt(items) -> list:
    """vLLM's `prompt_logprobs`: null for the first token, then per token a map of token
    id to {logprob, rank, decoded_token}, holding the token and the likeliest ones."""
    out = []
    for item in items or ():
        if item is None:
            out.append(None)
            continue
        token_id, token, logprob, rank, top = item
        position = {str(t): {"logprob": lp, "rank": i + 1, "decoded_token": text}
                    for i, (t, text, lp) in enumerate(top)}
        position[str(token_id)] = {"logprob": logprob, "rank": rank, "decoded_token": token}
        out.append(position)
    return out
