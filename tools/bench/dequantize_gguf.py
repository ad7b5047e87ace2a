#!/usr/bin/env python3
"""Writes a copy of a GGUF file with every quantized tensor expanded to f16
(or f32): the same model at full width, for benchmarks that need a larger
target model with the same vocabulary and behaviour as a quantized draft
(speculative decoding with a draft model, docs/performance.md).

    python3 tools/bench/dequantize_gguf.py IN.gguf OUT.gguf [--type f16|f32]

Uses gguf-py (pip install gguf), the reference reader and dequantizer of
the GGUF format, so no byte of the conversion is ours.
"""
import argparse

import numpy as np
import gguf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--type", choices=["f16", "f32"], default="f16")
    a = ap.parse_args()
    reader = gguf.GGUFReader(a.src)
    arch = reader.fields["general.architecture"]
    writer = gguf.GGUFWriter(a.dst, bytes(arch.parts[arch.data[0]]).decode())
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[1]
            if sub == gguf.GGUFValueType.STRING:
                value = [bytes(field.parts[i]).decode("utf-8", errors="surrogateescape") for i in field.data]
            else:
                value = [field.parts[i].tolist()[0] for i in field.data]
            writer.add_array(name, value)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_string(name, bytes(field.parts[field.data[0]]).decode("utf-8", errors="surrogateescape"))
        else:
            writer.add_key_value(name, field.parts[field.data[0]].tolist()[0], vtype)
    want = np.float16 if a.type == "f16" else np.float32
    for t in reader.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type)
        # Norms and other vectors stay f32, as converters write them.
        out = data.astype(np.float32 if data.ndim == 1 else want)
        writer.add_tensor(t.name, out)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


if __name__ == "__main__":
    main()
