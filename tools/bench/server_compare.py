"""Shared by the benchmarks that compare `troupe serve` with llama.cpp's
llama-server on one endpoint (embeddings_vs_llama_cpp.py,
rerank_vs_llama_cpp.py, vision_vs_llama_cpp.py): starting a server and waiting for it, the rounds
(a fresh server per engine per round, engines alternating which goes first)
and the table of medians and ratios."""
import json
import os
import random
import socket
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request

WORDS = ("actor message stage token embedding vector search query passage model layer cache batch step "
         "scheduler sampler kernel memory thread request server client latency throughput prefill").split()


def texts(n, n_words, seed=7):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(n_words)) for _ in range(n)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def start(cmd, env_updates, ready_body, path, limit=600, log=None):
    """Starts `cmd` + ["--port", N] and waits until POST `path` with
    `ready_body` answers; returns (process, base URL). The server's output
    goes to the file `log` when one is named, else nowhere."""
    port = free_port()
    env = dict(os.environ)
    env.update(env_updates)
    sink = open(log, "w") if log else subprocess.DEVNULL  # noqa: SIM115 -- the child holds it open
    proc = subprocess.Popen(cmd + ["--port", str(port)], stdout=sink, stderr=subprocess.STDOUT if log else sink,
                            env=env)
    if log:
        sink.close()
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + limit
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            post(base + path, ready_body, timeout=30)
            return proc, base
        except urllib.error.HTTPError as e:
            if e.code != 503:  # an answer, not "still loading": the request is wrong (a model name, say)
                proc.terminate()
                raise RuntimeError(f"the server refused the ready probe: {e.code} {e.read()[:300]!r}") from e
            time.sleep(0.5)
        except Exception:  # noqa: BLE001 -- still loading
            time.sleep(0.5)
    proc.terminate()
    raise RuntimeError("the server did not answer in time")


def add_common_args(ap, model_help):
    ap.add_argument("--troupe", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--model", required=True, help=model_help)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    add_troupe_args(ap)


def add_troupe_args(ap):
    """--troupe-env and --troupe-arg: what the Troupe server is started with
    beyond the model and the threads."""
    ap.add_argument("--troupe-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment of the Troupe server (TROUPE_NO_AMX=1: no AMX tiles)")
    ap.add_argument("--troupe-arg", action="append", default=[], metavar="ARG",
                    help="an argument added to `troupe serve` (--troupe-arg=--config=F: a topology file)")


def run_clients(n, client):
    """client(k) for k in 0..n-1, all at once; the seconds they took
    together. The first client's error is raised."""
    errors = []

    def guarded(k):
        try:
            client(k)
        except Exception as e:  # noqa: BLE001 -- raised below
            errors.append(e)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0


def llama_server_args(args, threads, *flags):
    ctx = args.clients * 2048
    return [args.llama_server, "-m", args.model, "-t", str(threads), *flags, "-c", str(ctx), "-np", str(args.clients),
            "-b", "2048", "-ub", "2048"]


def run_rounds(args, run_engine, agreement, unit):
    """For each thread count, `args.rounds` rounds of run_engine(engine,
    threads) -> (items/s, tokens/s, outputs) for "troupe" and "llama.cpp";
    agreement(troupe outputs, llama.cpp outputs) -> a phrase, raising
    SystemExit when they disagree. Returns the table's rows."""
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        per = {"troupe": [], "llama.cpp": []}
        ratios = []
        for rnd in range(args.rounds):
            order = ["troupe", "llama.cpp"] if rnd % 2 == 0 else ["llama.cpp", "troupe"]
            got = {engine: run_engine(engine, threads) for engine in order}
            for engine in order:
                per[engine].append(got[engine][:2])
            agree = agreement(got["troupe"][2], got["llama.cpp"][2])
            ratios.append(got["troupe"][0] / got["llama.cpp"][0])
            print(f"threads {threads} round {rnd}: troupe {got['troupe'][0]:.2f} {unit}/s, llama.cpp "
                  f"{got['llama.cpp'][0]:.2f} {unit}/s, {agree}", flush=True)
        med = {e: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for e, v in per.items()}
        rows.append((threads, med, statistics.median(ratios), min(ratios), max(ratios)))
    return rows


def print_table(rows, unit):
    print(f"| threads | llama.cpp {unit}/s | Troupe {unit}/s | llama.cpp tok/s | Troupe tok/s | Troupe / llama.cpp |")
    print("|---|---|---|---|---|---|")
    for threads, med, ratio, lo, hi in rows:
        print(f"| {threads} | {med['llama.cpp'][0]:.2f} | {med['troupe'][0]:.2f} | {med['llama.cpp'][1]:.0f} | "
              f"{med['troupe'][1]:.0f} | {ratio:.2f}x ({lo:.2f}-{hi:.2f}) |")
