"""The durable, resumable results file, in Python: the rule of docs/examples/sharded_inference.md
("The results file"), which examples/inference/results_file.cpp implements for the C++
example. OUT holds result lines only, in input order; OUT.job the job record (one JSON object),
written atomically before the first result. Appends are made durable (fdatasync) per batch; on
start a matching record resumes after the last complete line (a torn or invalid last line is
cut off), a differing one is refused naming every differing field."""
import hashlib
import json
import os

FORMAT = "spark-batch-results/1"
FIX = "; pass --restart-output to discard it and start over, or choose another --output"


def dump(obj):
    """JSON as the C++ side writes it (nlohmann's dump): sorted keys, no spaces, UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_hex(data):
    return hashlib.sha256(data).hexdigest()


def sha256_file_hex(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def differences(recorded, now):
    out = [f"{k} is missing there" if k not in recorded else f"{k} is {dump(recorded[k])} there, {dump(v)} here"
           for k, v in sorted(now.items()) if recorded.get(k, object()) != v or k not in recorded]
    out += [f"{k} is {dump(v)} there, absent here" for k, v in sorted(recorded.items()) if k not in now]
    return "; ".join(out)


def _fsync_folder(path):
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class ResultsFile:
    """existing: "resume" (refuse a differing record), "start_over" (--restart-output on a first
    attempt), "resume_if_same" (--restart-output on a restarted attempt). is_result(i, line)
    says whether line (bytes, no newline) is request i's result. align: the resume point is
    rounded down to a multiple of it (complete lines after it are cut and computed again)."""

    def __init__(self, path, job, existing, is_result, note, align=1):
        self.path = path
        record_path = path + ".job"
        job = dict(job, format=FORMAT)
        fresh = True
        if os.path.exists(record_path):
            try:
                recorded = json.loads(open(record_path, "rb").read())
            except ValueError:
                recorded = None
            diff = differences(recorded, job) if isinstance(recorded, dict) else "it is not JSON"
            if existing == "resume" and diff:
                raise ValueError(f"'{path}' holds the results of another job ({record_path}: {diff}){FIX}")
            fresh = existing == "start_over" or bool(diff)
        elif existing == "resume" and os.path.exists(path) and os.path.getsize(path) > 0:
            raise ValueError(f"'{path}' exists but has no job record ({record_path}), so it cannot be resumed{FIX}")
        self.done = 0
        if fresh:
            # Record gone, results emptied, new record: never a record over another job's lines.
            if os.path.exists(record_path):
                os.unlink(record_path)
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
            os.fsync(self.fd)
            _fsync_folder(path)
            tmp = record_path + ".tmp"
            with open(tmp, "wb") as f:
                f.write((dump(job) + "\n").encode())
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, record_path)
            _fsync_folder(path)
            return
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        text = open(path, "rb").read()
        keep, ends = 0, [0]  # ends[i]: bytes of the first i lines
        while keep < len(text):
            nl = text.find(b"\n", keep)
            last = nl < 0 or nl + 1 == len(text)
            if nl < 0 or self.done >= job["requests"] or not is_result(self.done, text[keep:nl]):
                if not last:
                    raise ValueError(f"'{path}' line {self.done + 1} is not request {self.done}'s result, and more "
                                     f"lines follow: the file was changed after it was written{FIX}")
                note(f"'{path}': removed a torn last line ({len(text) - keep} bytes) left by an interrupted run")
                break
            keep = nl + 1
            self.done += 1
            ends.append(keep)
        aligned = self.done - self.done % align if self.done < job["requests"] else self.done
        if aligned != self.done:
            note(f"'{path}': {self.done - aligned} results after the last whole batch are computed again")
            self.done = aligned
        if ends[self.done] != len(text):
            os.ftruncate(self.fd, ends[self.done])
            os.fsync(self.fd)

    def append(self, lines, count):
        view = memoryview(lines)
        while view:
            view = view[os.write(self.fd, view):]
        self.done += count

    def commit(self, durable):
        if durable:
            os.fdatasync(self.fd)

    def close(self):
        os.close(self.fd)
