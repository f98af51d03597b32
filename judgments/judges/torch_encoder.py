"""The fast path of the sentence-transformers backend, made for a GPU (issue #29, item 3). No Django; torch is
imported when an encoder is built, never at import. Twin of `minilm.py`, the numpy encoder of the same model.

sentence-transformers' ``encode`` tokenises each batch of 32 in the calling thread while the device waits, and
copies each batch's vectors back before starting the next: on an H200 it reaches about 5% of what the forward
pass alone can do. Here:

- texts are tokenised with the ``tokenizers`` package's parallel ``encode_batch_fast`` (``encode_batch`` without
  character offsets; ``encode_batch`` on versions before it) and the model's own ``tokenizer.json``, cut to
  ``max_length`` word pieces, a chunk of texts at a time, in a thread of its own, so the next chunk is tokenised
  while the device runs the current one;
- within a chunk, texts are sorted by length and batched by a budget of word pieces (padding included), so a
  batch carries little padding and short texts go many to a batch;
- the forward pass runs in float16 on CUDA (float32 on the CPU unless asked); mean pooling over the attention
  mask and the L2 norm are computed in float32, exactly as sentence-transformers' ``Pooling`` and ``Normalize``
  modules do; a chunk's vectors come back in one copy;
- the vectors are put back in the caller's order.

``tests/judges/test_torch_backend.py`` checks on the CPU that in float32 they equal ``SentenceTransformer.encode``'s
and the numpy encoder's within 1e-5, and that float16 cosines stay within 1e-3 of float32.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

DTYPES = ("float16", "bfloat16", "float32")
CHUNK_TEXTS = 4096  # texts tokenised at a time: enough to sort by length, small enough to overlap early
BATCH_TOKENS = {"cuda": 256 * 1024, "cpu": 8 * 1024}  # word pieces per forward step, padding included


class FastEncoder:
    """``encode(texts)``: one L2-normalised float32 row per text, in order, from a Hugging Face BERT-like `model`
    (the ``auto_model`` of a SentenceTransformer's first module) and its `tokenizer_file`."""

    def __init__(self, model: Any, tokenizer_file: Path | str, *, max_length: int, device: str = "cpu",
                 dtype: str = "float32", batch_tokens: int | None = None, chunk_texts: int = CHUNK_TEXTS) -> None:
        import torch
        from tokenizers import Tokenizer

        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, not {dtype!r}")
        self.torch = torch
        self.device = torch.device(device)
        self.dtype = dtype
        self.max_length = max_length
        self.batch_tokens = batch_tokens or BATCH_TOKENS["cuda" if self.device.type == "cuda" else "cpu"]
        if self.batch_tokens < max_length:
            raise ValueError(f"batch_tokens ({self.batch_tokens}) must hold one text of {max_length} word pieces")
        self.chunk_texts = chunk_texts
        self.model = model.to(device=self.device, dtype=getattr(torch, dtype)).eval()
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=max_length)
        # encode_batch_fast (tokenizers 0.20 and later) is encode_batch without character offsets: a third faster.
        self._encode_batch = getattr(self.tokenizer, "encode_batch_fast", self.tokenizer.encode_batch)
        self.dimension = int(self.model.config.hidden_size)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        size = self.chunk_texts
        chunks = [(start, texts[start:start + size]) for start in range(0, len(texts), size)]
        if not chunks:
            return out
        with ThreadPoolExecutor(1, thread_name_prefix="tokenise") as tokeniser:
            ahead = tokeniser.submit(self._batches, *chunks[0])
            for n in range(len(chunks)):
                batches = ahead.result()
                if n + 1 < len(chunks):
                    ahead = tokeniser.submit(self._batches, *chunks[n + 1])  # while the device runs this chunk
                order = np.concatenate([positions for positions, _ids, _lengths in batches])
                out[order] = self._forward_chunk(batches)
        return out

    def _batches(self, offset: int, texts: list[str]) -> list[tuple[np.ndarray, Any, Any]]:
        """`texts` tokenised, sorted longest first and cut into batches of at most `batch_tokens` padded word
        pieces: (the texts' positions in the caller's list, their ids padded with 0, their lengths), as tensors."""
        torch = self.torch
        pieces = [encoding.ids for encoding in self._encode_batch(texts)]  # .ids builds a list: once
        lengths = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
        order = np.argsort(-lengths, kind="stable")
        batches = []
        start = 0
        while start < len(order):
            longest = int(lengths[order[start]])
            chosen = order[start:start + max(1, self.batch_tokens // max(longest, 1))]
            ids = np.zeros((len(chosen), longest), dtype=np.int64)
            for row, i in enumerate(chosen):
                ids[row, :lengths[i]] = pieces[i]
            tensors = [torch.from_numpy(ids), torch.from_numpy(lengths[chosen])]
            if self.device.type == "cuda":
                tensors = [tensor.pin_memory() for tensor in tensors]
            batches.append((chosen + offset, *tensors))
            start += len(chosen)
        return batches

    def _forward_chunk(self, batches: list[tuple[np.ndarray, Any, Any]]) -> np.ndarray:
        torch = self.torch
        pooled = []
        with torch.inference_mode():
            for _positions, ids, lengths in batches:
                ids = ids.to(self.device, non_blocking=True)
                lengths = lengths.to(self.device, non_blocking=True)
                mask = (torch.arange(ids.shape[1], device=self.device)[None, :] < lengths[:, None]).to(torch.int64)
                hidden = self.model(input_ids=ids, attention_mask=mask,
                                    token_type_ids=torch.zeros_like(ids)).last_hidden_state.float()
                weights = mask.unsqueeze(-1).float()
                means = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
                pooled.append(torch.nn.functional.normalize(means, p=2, dim=1))
            return torch.cat(pooled).cpu().numpy()  # one copy back per chunk: the device is not stopped per batch
