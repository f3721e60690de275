"""`zest train --tokens FILE`: a token stream checked against the model's
vocabulary before any rank starts, so that a tokenizer larger than the
embedding is one line naming the file, the offset, the id and the
embedding, not an abort on every rank. The executable cuts the windows
(runtime/trainer/TokenStream.h) and checks the same bound (--token-bound)
for runs that do not go through zest."""

import os

from .tools import LaunchError

# Tokens scanned at a time: a corpus larger than memory is memory-mapped
# and read in pieces.
CHUNK = 1 << 24


def open_stream(path):
    """The token stream as a read-only NumPy array (memory-mapped): raw
    little-endian uint16 (nanoGPT's .bin) or a 1-D .npy."""
    import numpy as np

    if not os.path.isfile(path):
        raise LaunchError(f"--tokens: '{path}' does not exist")
    if path.endswith(".npy"):
        try:
            tokens = np.load(path, mmap_mode="r")
        except ValueError as error:
            raise LaunchError(f"{path}: not a NumPy .npy file: {error}") from None
        if tokens.ndim != 1:
            raise LaunchError(
                f"{path}: a token stream is 1-D, not of shape {list(tokens.shape)}"
            )
        if tokens.dtype.kind not in "iu" or tokens.dtype.itemsize < 2:
            raise LaunchError(
                f"{path}: a token stream holds uint16, uint32, int32 or int64 "
                f"ids, not {tokens.dtype}"
            )
        return tokens
    if os.path.getsize(path) % 2:
        raise LaunchError(
            f"{path}: an odd number of bytes: not a raw stream of uint16 tokens "
            "(nanoGPT's .bin); a .npy file may hold other types"
        )
    return np.memmap(path, dtype="<u2", mode="r")


def vocabulary(model):
    """(name, size) of the embedding the model's token ids index (its
    weight's name, as the executable's own check names it): a transformers
    model's input embeddings, else its only nn.Embedding; None when neither
    says."""
    from torch import nn

    names = {module: name for name, module in model.named_modules()}
    getter = getattr(model, "get_input_embeddings", None)
    embedding = getter() if callable(getter) else None
    if not isinstance(embedding, nn.Embedding):
        found = [m for m in names if isinstance(m, nn.Embedding)]
        embedding = found[0] if len(found) == 1 else None
    if embedding is None:
        return None
    name = names.get(embedding)
    name = name + ".weight" if name else "the embedding"
    return name, embedding.num_embeddings


def check_tokens(path, vocab):
    """Refuses a stream with an id outside `vocab` (vocabulary()'s (name,
    size), or None: only the file's form is checked)."""
    tokens = open_stream(path)
    if vocab is None:
        print(
            f"zest: --tokens: no single embedding found to check '{path}' "
            "against; the executable checks only that ids are not negative"
        )
        return
    name, size = vocab
    for begin in range(0, len(tokens), CHUNK):
        chunk = tokens[begin : begin + CHUNK]
        bad = (chunk < 0) | (chunk >= size)
        if bad.any():
            at = int(bad.argmax())
            value = int(chunk[at])
            what = (
                f"is negative: {name} takes ids 0 to {size - 1}"
                if value < 0
                else f"is outside the vocabulary of {name} ({size} ids)"
            )
            raise LaunchError(f"{path}: token {value} at offset {begin + at} {what}")
