"""The reference graph laid out in layers, for an inline SVG the page draws without any script.

A thread sits one column right of the right-most thread it references (longest-path layering), so the
threads others build on are on the left and arrows point from a thread to what it reads. In a column,
threads are ordered by objective, then by where the threads they reference sit (one barycentre pass),
which keeps most arrows short. Cycles (references may form them) are broken where the walk meets them.
"""

from __future__ import annotations

from dataclasses import dataclass

from leslie.store.model import Objective, Thread

NODE_W = 260
NODE_H = 46
GAP_X = 170
GAP_Y = 18
MARGIN = 20
TITLE_CHARS = 28  # fits NODE_W in the page's bold 13 px


@dataclass(frozen=True)
class Node:
    """One thread's box: top-left corner, and what it says."""

    id: str
    x: int
    y: int
    title: str
    status: str
    objective: str


@dataclass(frozen=True)
class Edge:
    """An arrow from a thread to a thread it references; `label` lists the scope paths ("" when whole)."""

    source: str
    target: str
    path: str  # the SVG path data
    label: str
    label_x: int
    label_y: int
    order: bool = False  # an order edge (SPEC §14): from the thread to one it comes after, drawn apart


@dataclass(frozen=True)
class Graph:
    """The laid-out graph and the size of its drawing."""

    nodes: list[Node]
    edges: list[Edge]
    width: int
    height: int
    node_width: int = NODE_W
    node_height: int = NODE_H


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _layers(threads: dict[str, Thread]) -> dict[str, int]:
    """Longest-path layer of each thread (0: references nothing live), iteratively (a long chain must not
    hit the recursion limit); an edge back into the current walk is ignored, which breaks every cycle."""
    layer: dict[str, int] = {}
    walking: set[str] = set()
    for start in sorted(threads):
        if start in layer:
            continue
        stack: list[tuple[str, bool]] = [(start, False)]
        while stack:
            node, done = stack.pop()
            if done:
                walking.discard(node)
                targets = [t for t in threads[node].references if t in layer]
                layer[node] = 1 + max((layer[t] for t in targets), default=-1)
                continue
            if node in layer or node in walking:
                continue
            walking.add(node)
            stack.append((node, True))
            stack.extend((t, False) for t in sorted(threads[node].references, reverse=True)
                         if t in threads and t != node and t not in layer and t not in walking)
    return layer


def layout(threads: dict[str, Thread], objectives: dict[str, Objective]) -> Graph:
    """Place every live thread and draw every reference between live threads."""
    layer = _layers(threads)
    columns: dict[int, list[str]] = {}
    for thread_id, number in layer.items():
        columns.setdefault(number, []).append(thread_id)
    row: dict[str, float] = {}
    for number in sorted(columns):
        def key(thread_id: str) -> tuple[str, float, str]:
            thread = threads[thread_id]
            placed = [row[t] for t in thread.references if t in row]
            centre = sum(placed) / len(placed) if placed else 0.0
            return (thread.objective or "~", centre, thread.title.casefold())

        columns[number].sort(key=key)
        for position, thread_id in enumerate(columns[number]):
            row[thread_id] = position
    nodes: dict[str, Node] = {}
    for thread_id, number in layer.items():
        thread = threads[thread_id]
        objective = objectives.get(thread.objective or "")
        nodes[thread_id] = Node(thread_id, MARGIN + number * (NODE_W + GAP_X),
                                MARGIN + int(row[thread_id]) * (NODE_H + GAP_Y), _clip(thread.title, TITLE_CHARS),
                                thread.status, _clip(objective.title if objective else "", TITLE_CHARS - 6))
    edges = []
    for source_id in sorted(threads):
        source = nodes[source_id]
        for target_id, scope in sorted(threads[source_id].references.items()):
            target = nodes.get(target_id)
            if target is None or target_id == source_id:
                continue
            x1, y1 = source.x, source.y + NODE_H // 2
            x2, y2 = target.x + NODE_W, target.y + NODE_H // 2
            bend = max(40, abs(x1 - x2) // 2)
            path = f"M{x1},{y1} C{x1 - bend},{y1} {x2 + bend},{y2} {x2},{y2}"
            # The label sits in the gap just left of the source, where only the arrows leaving it run.
            edges.append(Edge(source_id, target_id, path, ", ".join(scope), x1 - GAP_X // 2, y1 - 5))
        for target_id in sorted(threads[source_id].after):
            target = nodes.get(target_id)
            if target is None or target_id == source_id:
                continue
            x1, y1 = source.x + NODE_W // 2, source.y + NODE_H
            x2, y2 = target.x + NODE_W // 2, target.y
            path = f"M{x1},{y1} C{x1},{y1 + 30} {x2},{y2 - 30} {x2},{y2}"
            edges.append(Edge(source_id, target_id, path, "", x1, y1, order=True))
    width = MARGIN * 2 + (max(columns, default=0) + 1) * (NODE_W + GAP_X)
    height = MARGIN * 2 + max((len(c) for c in columns.values()), default=0) * (NODE_H + GAP_Y)
    return Graph(sorted(nodes.values(), key=lambda n: (n.x, n.y)), edges, width, height)
