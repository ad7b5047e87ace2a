#!/usr/bin/env python3
"""Time to first token of image chats: `troupe serve` on a LLaVA directory
against llama.cpp's llama-server (--mmproj) on the same weights converted to
GGUF (tools/bench/make_llava_checkpoint.py writes all three), in one run on
one machine (or, without --model, Troupe on llama-server's own two files:
the GGUF and its mmproj), through the same OpenAI endpoint (POST /v1/chat/completions,
streamed).

For each thread count and round, each engine gets a fresh server (engines
alternate which goes first), one warm-up image chat, then R chats one after
another, each with a different synthetic 640x480 JPEG (so no prefix or image
cache helps) and the same question, temperature 0, max_tokens 16 with
ignore_eos (both servers honour it: every answer is 16 tokens). Each chat's
time to first token is the time from sending it to the first streamed chunk
that carries text; its total time runs to the end of the stream. The table
gives each engine's median time to first token and total time over all its
chats, the median and range of the per-round ratio llama.cpp / Troupe of the
rounds' median times to first token (above 1: Troupe answers first), and the
prompt tokens each server reports (usage), which show that both processed
the 576 image tokens. Needs Pillow (/work/refenv/bin/python has it). The
llama.cpp build is the caller's: this project neither builds nor ships it.

    /work/refenv/bin/python tools/bench/vision_vs_llama_cpp.py --troupe build/release/troupe \\
        --llama-server /path/to/llama.cpp/build/bin/llama-server \\
        [--model ~/.cache/troupe/bench/llava-1.5-shaped] \\
        --gguf ~/.cache/troupe/bench/llava-1.5-shaped.text.f16.gguf \\
        --mmproj ~/.cache/troupe/bench/llava-1.5-shaped.mmproj.f16.gguf \\
        --threads 1,2 --requests 8 --rounds 3 [--troupe-env TROUPE_NO_AMX=1] [--troupe-arg=--kv-type=f16]
"""
import argparse
import base64
import io
import json
import os
import random
import shlex
import statistics
import sys
import time
import urllib.request
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter

from server_compare import add_troupe_args, start

QUESTION = "Describe this picture in one sentence."


def photo(seed, width=640, height=480):
    """A deterministic photo-sized JPEG (quality 90): two colour gradients,
    a few filled shapes, a blur and per-pixel noise, so that every image of
    a run differs and none compresses to nothing."""
    rng = random.Random(seed)
    grad = Image.linear_gradient("L").resize((width, height)).rotate(rng.uniform(0, 360), expand=False)
    radial = Image.radial_gradient("L").resize((width, height))
    r, g, b = (Image.eval(c, lambda v, k=rng.randint(0, 255): (v + k) % 256) for c in (grad, radial, grad))
    img = Image.merge("RGB", (r, g, b.transpose(Image.Transpose.FLIP_LEFT_RIGHT)))
    draw = ImageDraw.Draw(img)
    for _ in range(12):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        x1, y1 = x0 + rng.randint(20, 240), y0 + rng.randint(20, 180)
        fill = tuple(rng.randrange(256) for _ in range(3))
        shape = rng.choice((draw.rectangle, draw.ellipse))
        shape((x0, y0, x1, y1), fill=fill)
    img = img.filter(ImageFilter.GaussianBlur(1.5))
    noise = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    img = Image.blend(img, noise, 0.12)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=90)
    return buf.getvalue()


def chat_body(model, jpeg, max_tokens):
    url = "data:image/jpeg;base64," + base64.b64encode(jpeg).decode()
    return {"model": model, "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                                      {"type": "text", "text": QUESTION}]}],
            "stream": True, "stream_options": {"include_usage": True}, "temperature": 0, "max_tokens": max_tokens,
            "ignore_eos": True}


def stream_chat(base, body, timeout=600):
    """Sends one streamed chat; returns (seconds to the first chunk with
    text, seconds to the end, prompt tokens, the text)."""
    req = urllib.request.Request(base + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    first, prompt_tokens, text = None, None, []
    with urllib.request.urlopen(req, timeout=timeout) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"]["prompt_tokens"]
            for choice in chunk.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    text.append(piece)
                    if first is None:
                        first = time.perf_counter() - t0
    total = time.perf_counter() - t0
    return (first if first is not None else total), total, prompt_tokens, "".join(text)


def server_command(args, engine, threads):
    """(argv without the port, environment updates) of one engine's server."""
    if engine == "troupe":
        # --model DIR: the checkpoint; without it, llama.cpp's own two files.
        files = ["--model", args.model] if args.model else ["--model", args.gguf, "--mmproj", args.mmproj]
        cmd = [args.troupe, "serve", *files, "-t", str(threads), *args.troupe_arg]
        return cmd, dict(kv.split("=", 1) for kv in args.troupe_env)
    lib = str(Path(args.llama_server).resolve().parent)
    cmd = [args.llama_server, "-m", args.gguf, "--mmproj", args.mmproj, "-t", str(threads), "-c", "4096", "-np", "1"]
    return cmd, {"LD_LIBRARY_PATH": lib + os.pathsep + os.environ.get("LD_LIBRARY_PATH", "")}


def run_engine(args, engine, threads, images, log):
    """One fresh server: a warm-up image chat, then one chat per image, one
    after another; a list of (ttft, total, prompt tokens, text)."""
    cmd, env = server_command(args, engine, threads)
    # The model id Troupe serves (a directory's name, a file's stem); llama-server takes any.
    name = Path(args.model).name if args.model else Path(args.gguf).stem
    ready = {"model": name, "messages": [{"role": "user", "content": "ready?"}], "max_tokens": 1}
    proc, base = start(cmd, env, ready, "/v1/chat/completions", log=log)
    try:
        stream_chat(base, chat_body(name, photo(10_000), args.max_tokens))
        return [stream_chat(base, chat_body(name, jpeg, args.max_tokens)) for jpeg in images]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--troupe", required=True)
    ap.add_argument("--llama-server", required=True, help="llama.cpp's llama-server (its libraries beside it)")
    ap.add_argument("--model", help="the checkpoint directory Troupe serves (default: Troupe serves --gguf and "
                    "--mmproj, the files llama-server reads)")
    ap.add_argument("--gguf", required=True, help="the same text model as a GGUF, for llama-server -m")
    ap.add_argument("--mmproj", required=True, help="the same vision tower and projector, for llama-server --mmproj")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=8, help="image chats per server, one after another")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--logs", type=Path, help="a folder for the servers' output (default: none kept)")
    add_troupe_args(ap)
    args = ap.parse_args()
    for name in ("model", "gguf", "mmproj"):
        if getattr(args, name):
            setattr(args, name, str(Path(getattr(args, name)).expanduser()))
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)

    images = [photo(seed) for seed in range(1, args.requests + 1)]
    print(f"{len(images)} JPEGs of 640x480, {min(map(len, images)) // 1024}-{max(map(len, images)) // 1024} KiB",
          flush=True)
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        per = {"troupe": [], "llama.cpp": []}
        ratios = []
        for rnd in range(args.rounds):
            order = ["troupe", "llama.cpp"] if rnd % 2 == 0 else ["llama.cpp", "troupe"]
            got = {}
            for engine in order:
                log = args.logs / f"{engine}-t{threads}-r{rnd}.log" if args.logs else None
                got[engine] = run_engine(args, engine, threads, images, log)
                per[engine].extend(got[engine])
            med = {e: statistics.median(x[0] for x in got[e]) for e in got}
            ratios.append(med["llama.cpp"] / med["troupe"])
            print(f"threads {threads} round {rnd}: median TTFT troupe {med['troupe'] * 1000:.0f} ms, llama.cpp "
                  f"{med['llama.cpp'] * 1000:.0f} ms, prompt tokens troupe "
                  f"{sorted({x[2] for x in got['troupe']}, key=str)} llama.cpp "
                  f"{sorted({x[2] for x in got['llama.cpp']}, key=str)}", flush=True)
            for e in order:
                print(f"  {e} first answer: {got[e][0][3]!r}", flush=True)
        rows.append((threads, per, ratios))

    print(f"\n{args.requests} image chats per server, one at a time, {args.max_tokens} tokens each, {args.rounds} "
          f"rounds{', Troupe with ' + ' '.join(args.troupe_env + args.troupe_arg) if args.troupe_env or args.troupe_arg else ''}\n")
    print("| threads | llama.cpp TTFT ms | Troupe TTFT ms | llama.cpp total ms | Troupe total ms | "
          "TTFT llama.cpp / Troupe | prompt tokens llama.cpp / Troupe |")
    print("|---|---|---|---|---|---|---|")
    for threads, per, ratios in rows:
        ttft = {e: statistics.median(x[0] for x in v) * 1000 for e, v in per.items()}
        total = {e: statistics.median(x[1] for x in v) * 1000 for e, v in per.items()}
        tokens = {e: "/".join(str(t) for t in sorted({x[2] for x in v}, key=str)) for e, v in per.items()}
        print(f"| {threads} | {ttft['llama.cpp']:.0f} | {ttft['troupe']:.0f} | {total['llama.cpp']:.0f} | "
              f"{total['troupe']:.0f} | {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) | "
              f"{tokens['llama.cpp']} / {tokens['troupe']} |")
    print("\nCommands (each server also got --port N):")
    print("  " + shlex.join([sys.executable, *sys.argv]))
    for engine in ("troupe", "llama.cpp"):
        cmd, env = server_command(args, engine, "N")
        print("  " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + (" " if env else "") + shlex.join(cmd))


if __name__ == "__main__":
    main()
