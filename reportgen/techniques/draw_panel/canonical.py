"""The same ONNX bytes for the same network: tf2onnx names the nodes it makes from a global
counter and visits them in an order that changes from one conversion to the next, so two exports
of one network differ in names and node order only. The artifact store and the site compare
files by content, so the export is rewritten into a canonical form: every value is named by a
hash of what computes it (its node's operator, attributes and inputs, or an initializer's
contents), the nodes are listed in topological order with ties broken by those hashes, and then
the names are shortened to their rank (v0, v1, ...; nodes n0, n1, ...). The graph's inputs and
outputs keep their names. Intermediate shape annotations (value_info) are dropped: onnxruntime
infers them again.
"""

from __future__ import annotations

import hashlib
import heapq


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()


def canonical_onnx(data: bytes) -> bytes:
    """`data` (a serialised ONNX model) with canonical names and node order."""
    import onnx

    model = onnx.load_from_string(data)
    graph = model.graph
    keep = {v.name for v in graph.input} | {v.name for v in graph.output}
    key: dict[str, str] = {name: _digest("io", name) for name in keep}
    from onnx import numpy_helper

    for init in graph.initializer:
        values = numpy_helper.to_array(init)
        key[init.name] = _digest("init", str(values.dtype), str(values.shape), values.tobytes())
    nodes = list(graph.node)
    producers = {out: i for i, node in enumerate(nodes) for out in node.output}

    def attributes(node) -> bytes:
        return b"".join(a.SerializeToString(deterministic=True) for a in
                        sorted(node.attribute, key=lambda a: a.name))

    # hashes in topological order (Kahn's algorithm; ties broken by the hashes)
    consumers: dict[int, list[int]] = {i: [] for i in range(len(nodes))}
    for i, node in enumerate(nodes):
        for name in set(node.input):
            if name in producers:
                consumers[producers[name]].append(i)

    def hash_node(i: int) -> str:
        node = nodes[i]
        digest = _digest("node", node.op_type, node.domain, attributes(node),
                         *[key.get(name, "") if name else "" for name in node.input])
        for index, out in enumerate(node.output):
            if out not in keep:
                key[out] = _digest(digest, str(index))
        return digest

    def inputs_done(i: int) -> bool:
        return all(producers[name] in done for name in nodes[i].input if name in producers)

    done: set[int] = set()
    ready = [(hash_node(i), i) for i in range(len(nodes)) if inputs_done(i)]
    heapq.heapify(ready)
    queued = {i for _, i in ready}
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        done.add(i)
        for j in consumers[i]:
            if j not in queued and inputs_done(j):
                queued.add(j)
                heapq.heappush(ready, (hash_node(j), j))
    if len(order) != len(nodes):            # not a DAG as read: leave the export as it is
        return data

    ranked = sorted({name for name in key if name not in keep}, key=lambda n: key[n])
    short = {name: f"v{rank}" for rank, name in enumerate(ranked)}
    rename = lambda name: short.get(name, name)     # noqa: E731 (keep: graph inputs, outputs)
    fresh = []
    for rank, i in enumerate(order):
        node = onnx.NodeProto()
        node.CopyFrom(nodes[i])
        node.name = f"n{rank}"
        node.doc_string = ""
        node.input[:] = [rename(n) if n else n for n in node.input]
        node.output[:] = [rename(n) for n in node.output]
        fresh.append(node)
    del graph.node[:]
    graph.node.extend(fresh)
    for init in graph.initializer:
        init.name = rename(init.name)
    inits = sorted(graph.initializer, key=lambda t: t.name)
    copies = []
    for init in inits:
        t = onnx.TensorProto()
        t.CopyFrom(init)
        copies.append(t)
    del graph.initializer[:]
    graph.initializer.extend(copies)
    del graph.value_info[:]
    graph.doc_string = ""
    return model.SerializeToString(deterministic=True)
