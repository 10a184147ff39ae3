"""The exact prefix cache (docs/serving.md §4): decode-state snapshots in a token trie, bounded by a byte budget
with least-recently-used eviction. A snapshot is a copy of the state after exactly its prefix and the logits
row after the prefix's last token, so a hit continues with the bits a cold prefill would have given."""

import threading


class _Node:
    __slots__ = ("children", "snapshot", "parent", "token")

    def __init__(self, parent=None, token=None):
        self.children = {}
        self.snapshot = None
        self.parent = parent
        self.token = token


class _Snapshot:
    __slots__ = ("state", "logits", "length", "used", "node")

    def __init__(self, state, logits, length, used, node):
        self.state, self.logits, self.length, self.used, self.node = state, logits, length, used, node


class PrefixCache:
    """Snapshots keyed by their exact token prefix. `lookup` finds the longest cached prefix of a prompt
    (never longer than the prompt: a recurrent state cannot be rewound), `insert` adds one and evicts the
    least recently used until the budget holds."""

    def __init__(self, budget_bytes, snapshot_bytes):
        self.budget = int(budget_bytes)
        self.snapshot_bytes = int(snapshot_bytes)
        self.root = _Node()
        self.snapshots = []
        self.clock = 0
        self.lock = threading.Lock()

    @property
    def bytes(self):
        return len(self.snapshots) * self.snapshot_bytes

    def lookup(self, ids, copy):
        """(length, state copy, logits) of the longest cached prefix of `ids`, or None."""
        with self.lock:
            node, best = self.root, None
            for token in ids:
                node = node.children.get(token)
                if node is None:
                    break
                if node.snapshot is not None:
                    best = node.snapshot
            if best is None:
                return None
            self.clock += 1
            best.used = self.clock
            return best.length, copy(best.state), best.logits

    def insert(self, ids, state, logits):
        """Caches a copy-owned `state` (the caller gives up the object) after exactly `ids`."""
        if self.snapshot_bytes > self.budget or not ids:
            return
        with self.lock:
            node = self.root
            for token in ids:
                child = node.children.get(token)
                if child is None:
                    child = node.children[token] = _Node(node, token)
                node = child
            self.clock += 1
            if node.snapshot is not None:
                node.snapshot.used = self.clock
                return
            node.snapshot = _Snapshot(state, logits, len(ids), self.clock, node)
            self.snapshots.append(node.snapshot)
            while self.bytes > self.budget:
                self._evict()

    def holds(self, ids):
        """Whether a snapshot sits at exactly `ids`."""
        with self.lock:
            node = self.root
            for token in ids:
                node = node.children.get(token)
                if node is None:
                    return False
            return node.snapshot is not None

    def _evict(self):
        oldest = min(self.snapshots, key=lambda s: s.used)
        self.snapshots.remove(oldest)
        node = oldest.node
        node.snapshot = None
        # Prune the branch that now leads to no snapshot.
        while node.parent is not None and not node.children and node.snapshot is None:
            del node.parent.children[node.token]
            node = node.parent
