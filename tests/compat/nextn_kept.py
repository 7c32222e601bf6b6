#!/usr/bin/env python3
"""Checks that each OUT.gguf carries SRC.gguf's multi-token-prediction block
as SRC stores it: the same tensors of the blocks past the ones the model runs
(type, shape and bytes), and the same block_count, nextn_predict_layers and
recurrent-layer list, so llama.cpp finds the block where its converter put
it. With --quantized, OUT's block tensors may have another type (an export
quantizes them as llama-quantize does) but the same names and shapes. With
--every-tensor, every tensor of OUT must be SRC's, byte for byte (a resumed
run against the one that was not stopped).

  GGUF_PY=llama-src/gguf-py python3 nextn_kept.py [--quantized|--every-tensor] SRC.gguf OUT.gguf...
"""
import os
import sys

sys.path.insert(0, os.environ["GGUF_PY"])
import gguf  # noqa: E402


def field(reader, key):
    f = reader.get_field(key)
    if f is None:
        return None
    return [f.parts[i].tolist() for i in f.data]


def nextn_tensors(reader, arch):
    blocks = field(reader, f"{arch}.block_count")[0][0]
    nextn = field(reader, f"{arch}.nextn_predict_layers")
    if nextn is None:
        return None
    first = blocks - nextn[0][0]
    return {t.name: t for t in reader.tensors if t.name.startswith("blk.") and int(t.name.split(".")[1]) >= first}


def main():
    args = sys.argv[1:]
    quantized, every = args[0] == "--quantized", args[0] == "--every-tensor"
    if quantized or every:
        args = args[1:]
    src = gguf.GGUFReader(args[0])
    arch = bytes(src.get_field("general.architecture").parts[-1]).decode()
    want = {t.name: t for t in src.tensors} if every else nextn_tensors(src, arch)
    if not want:
        sys.exit(f"{args[0]}: no multi-token-prediction block to compare")
    keys = [f"{arch}.block_count", f"{arch}.nextn_predict_layers", f"{arch}.attention.recurrent_layers"]
    for path in args[1:]:
        out = gguf.GGUFReader(path)
        for k in keys:
            if field(out, k) != field(src, k):
                sys.exit(f"{path}: {k} is {field(out, k)}, {args[0]} has {field(src, k)}")
        got = {t.name: t for t in out.tensors} if every else nextn_tensors(out, arch)
        if got is None or sorted(got) != sorted(want):
            sys.exit(f"{path}: the prediction block has {sorted(got or [])}, expected {sorted(want)}")
        for name, t in want.items():
            o = got[name]
            if list(o.shape) != list(t.shape):
                sys.exit(f"{path}: {name} has shape {list(o.shape)}, expected {list(t.shape)}")
            if not quantized and (o.tensor_type != t.tensor_type or bytes(o.data.tobytes()) != bytes(t.data.tobytes())):
                sys.exit(f"{path}: {name} differs from {args[0]}'s ({o.tensor_type.name} vs {t.tensor_type.name})")
        what = "all" if every else "the prediction block's"
        print(f"{path}: {what} {len(want)} tensors {'named and shaped' if quantized else 'byte-identical'} "
              f"as in {os.path.basename(args[0])}")


if __name__ == "__main__":
    main()
