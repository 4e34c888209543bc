#!/usr/bin/python3
"""Checks the project's markdown: no dated work-log lines, no links to files that do not exist.

    tests/docs/check_docs.py [--root DIR] [--skip-worklog PATH]...

Files: README.md, CHANGELOG.md and bench/README.md at the root, and every *.md under docs/.
Paths are relative to --root (default: the repository). Exit 1 with one line per finding
(FILE:LINE: what), 0 when clean. Python 3 standard library only.

Work-log lines (the docs describe the product as it is; history goes to CHANGELOG.md, figures
to docs/benchmarks.md): a line is one when, outside code blocks and code spans, it holds
  - a date: 2026-12-05 (an ISO timestamp such as 2026-11-30T06:07:05Z in an example of output
    is allowed), or a day and month such as "5 Dec" / "30 Nov 2026";
  - a clock time in UTC: "07:42 UTC", "10:15-10:45 UTC";
  - work-period numbering: "the seventeenth session", "8th session", "session 12", "third wave";
  - a reference to FACTS.md (a file outside this repository).
Not checked for work-log lines: CHANGELOG.md (version headings carry dates) and
docs/benchmarks.md (generated; it shows each result set's date), and each --skip-worklog PATH.

Links: every markdown link [text](target) and reference definition [id]: target whose target
is not a URL (scheme:) or a bare #anchor must name an existing file or folder, relative to the
file that holds it; a #anchor into a markdown file (or a bare #anchor into the same file) must
be one of its headings (GitHub's slug: lower case, punctuation dropped, spaces to hyphens,
"-1", "-2" for repeats) or an <a id="..."> in it."""
import argparse
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*"
ORDINALS = (r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
            r"thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|"
            r"\d+(?:st|nd|rd|th))")
WORKLOG = [
    (re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b(?!T\d)"), "a date"),
    (re.compile(r"\b[0-3]?\d " + MONTHS + r"\b(?: 20\d\d)?"), "a day and month"),
    (re.compile(r"\b" + MONTHS + r" [0-3]?\d(?:st|nd|rd|th)?,? 20\d\d\b"), "a month, day and year"),
    (re.compile(r"\b[0-2]?\d:[0-5]\d(?:\s*-\s*[0-2]?\d:[0-5]\d)?\s*UTC\b"), "a clock time"),
    (re.compile(r"\b" + ORDINALS + r"\s+(?:session|wave)s?\b", re.I), "a numbered work period"),
    (re.compile(r"\bsessions?\s+\d+\b", re.I), "a numbered work period"),
    (re.compile(r"FACTS\.md"), "a reference to FACTS.md, which is not in this repository"),
]
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODESPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def slug(heading):
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return h.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        out, seen, fence = set(), {}, None
        with open(path, encoding="utf-8") as f:
            for line in f:
                m = FENCE.match(line)
                if m:
                    fence = None if fence == m.group(1) else (fence or m.group(1))
                    continue
                if fence:
                    continue
                m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
                if m:
                    s = slug(m.group(1))
                    n = seen.get(s, 0)
                    seen[s] = n + 1
                    out.add(s if n == 0 else f"{s}-{n}")
                out.update(re.findall(r'<a (?:id|name)="([^"]+)"', line))
        _anchors[path] = out
    return _anchors[path]


def files(root):
    out = [p for p in ("README.md", "CHANGELOG.md", "bench/README.md") if os.path.isfile(os.path.join(root, p))]
    out += sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True))
    return out


def prose_lines(text):
    """(line number, line with code spans blanked) for lines outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m:
            fence = None if fence == m.group(1) else (fence or m.group(1))
            continue
        if fence or line.startswith("    ") and not line.lstrip().startswith(("-", "*", "|")):
            # fenced or indented code: links are not links there, but dates still count
            yield n, line, False
            continue
        yield n, CODESPAN.sub(lambda s: "`" + " " * (len(s.group(0)) - 2) + "`", line), True


def check(root, skip_worklog):
    found = []
    for rel in files(root):
        path = os.path.join(root, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        worklog = rel not in ("CHANGELOG.md", "docs/benchmarks.md") and rel not in skip_worklog
        for n, line, is_prose in prose_lines(text):
            if worklog:
                for rx, what in WORKLOG:
                    m = rx.search(line)
                    if m:
                        found.append(f"{rel}:{n}: dated work-log entry ({what}: '{m.group(0)}'); "
                                     f"history goes to CHANGELOG.md, figures to docs/benchmarks.md")
                        break
            if not is_prose:
                continue
            targets = [m.group(1) for m in LINK.finditer(line)]
            m = REFDEF.match(line)
            if m:
                targets.append(m.group(1))
            for t in targets:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t):
                    continue
                target, _, anchor = t.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
                if not os.path.exists(resolved):
                    found.append(f"{rel}:{n}: link to a file that does not exist: {t}")
                elif anchor and resolved.endswith(".md") and os.path.isfile(resolved) \
                        and anchor not in anchors(resolved):
                    found.append(f"{rel}:{n}: link to an anchor that does not exist: {t}")
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=ROOT)
    ap.add_argument("--skip-worklog", action="append", default=[], metavar="PATH",
                    help="a file (relative to --root) not checked for work-log lines")
    a = ap.parse_args()
    found = check(os.path.abspath(a.root), set(a.skip_worklog))
    for line in found:
        print(line)
    if found:
        print(f"check_docs: {len(found)} finding(s); see the top of tests/docs/check_docs.py for the rules",
              file=sys.stderr)
        return 1
    print(f"check_docs: {len(files(os.path.abspath(a.root)))} files clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
