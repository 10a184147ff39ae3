"""The server's counters, gauges and histograms, rendered in Prometheus' text exposition format (version 0.0.4)."""

import threading

# name, kind, help; one metric a line.
_DEFINITIONS = """
samebits_requests_total counter HTTP requests answered, by route and status code
samebits_rejected_total counter requests refused because the queue was full (503)
samebits_prompt_tokens_total counter prompt tokens received
samebits_prefill_tokens_total counter prompt tokens actually computed (cache hits excluded)
samebits_completion_tokens_total counter tokens generated
samebits_prefix_cache_hits_total counter requests that resumed from a cached prefix
samebits_prefix_cache_saved_tokens_total counter prompt tokens not computed thanks to the cache
samebits_prefix_cache_bytes gauge bytes of state snapshots held by the prefix cache
samebits_queue_depth gauge sequences waiting to join the running batch
samebits_running gauge sequences in the running batch
samebits_batch_size histogram running sequences per engine tick
samebits_decode_rows histogram sequences advanced by one batched decode step
samebits_time_to_first_token_seconds histogram seconds from arrival to the first generated token
samebits_request_seconds histogram seconds from arrival to the last token
"""
_HELP = {name: (kind, text) for name, kind, text in
         (line.split(" ", 2) for line in _DEFINITIONS.strip().splitlines())}
_BUCKETS = dict(
    samebits_batch_size=(1, 2, 4, 8, 16, 32, 64, 128),
    samebits_decode_rows=(1, 2, 4, 8, 16, 32, 64, 128),
    samebits_time_to_first_token_seconds=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    samebits_request_seconds=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))


class Metrics:
    def __init__(self):
        self.lock = threading.Lock()
        self.values = {}  # (name, labels) -> number
        self.histograms = {name: [[0] * (len(b) + 1), 0.0] for name, b in _BUCKETS.items()}

    def inc(self, name, amount=1, **labels):
        key = (name, tuple(sorted(labels.items())))
        with self.lock:
            self.values[key] = self.values.get(key, 0) + amount

    def set(self, name, value):
        with self.lock:
            self.values[(name, ())] = value

    def observe(self, name, value):
        with self.lock:
            counts, _ = self.histograms[name]
            bounds = _BUCKETS[name]
            index = next((i for i, b in enumerate(bounds) if value <= b), len(bounds))
            counts[index] += 1
            self.histograms[name][1] += value

    def render(self):
        lines = []
        with self.lock:
            for name, (kind, text) in _HELP.items():
                lines.append(f"# HELP {name} {text}")
                lines.append(f"# TYPE {name} {kind}")
                if kind == "histogram":
                    counts, total = self.histograms[name]
                    running = 0
                    for bound, count in zip(_BUCKETS[name] + ("+Inf",), counts):
                        running += count
                        lines.append(f'{name}_bucket{{le="{bound}"}} {running}')
                    lines.append(f"{name}_sum {total}")
                    lines.append(f"{name}_count {running}")
                    continue
                series = [(k[1], v) for k, v in self.values.items() if k[0] == name] or [((), 0)]
                for labels, value in sorted(series):
                    label_text = ",".join(f'{k}="{v}"' for k, v in labels)
                    lines.append(f"{name}{{{label_text}}} {value}" if label_text else f"{name} {value}")
        return "\n".join(lines) + "\n"
