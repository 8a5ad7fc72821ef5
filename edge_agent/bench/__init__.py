"""`edge-agent bench`: our engine beside llama.cpp's own tools, in paired rounds, with a roofline.

harness (the run and its report), ours (our engine's rounds), llamacpp (llama.cpp's C++ tools,
the Python binding as a labelled fallback), roofline (bytes per token, memory bandwidth),
quality (perplexity). Nothing here is imported by the daemon.
"""
