#!/usr/bin/env python3
"""The layering check (docs/architecture.md, "Layers").

Reads every #include of the library sources against the layer table CMake
writes (build/layers.txt: one line per layer, "NAME FOLDER USES...", lowest
first) and fails on:
  - an include of a folder the including layer may not use (upward, or
    sideways to a layer it does not name), or of a file that does not exist;
  - a quoted include that is not a path from the project root;
  - a circle among the modules of one folder (a module is a .c/.cu file and
    the header of the same name: kernels/pool.c with kernels/pool.h).

usage: check_layers.py SOURCE_DIR LAYERS_TXT
       check_layers.py --self-test   (the check finds an upward include and a circle)
"""
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
SOURCES = ('.c', '.h', '.cu', '.cuh')


def read_layers(path):
    layers = []  # (name, folder, uses) lowest first
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts:
                layers.append((parts[0], parts[1], parts[2:]))
    return layers


def owner(folders, rel):
    """The layer folder holding rel (the longest folder that is a prefix)."""
    best = None
    for folder in folders:
        if rel.startswith(folder + '/') and (best is None or len(folder) > len(best)):
            best = folder
    return best


def module_of(rel):
    return os.path.splitext(rel)[0]


def circles(graph):
    """Every set of two or more nodes of graph (dict node -> set) that reach
    each other, each as a sorted list (Tarjan's strongly connected components)."""
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(n):
        index[n] = low[n] = len(index)
        stack.append(n)
        on.add(n)
        for m in sorted(graph.get(n, ())):
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in on:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            comp = []
            while True:
                m = stack.pop()
                on.discard(m)
                comp.append(m)
                if m == n:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for n in sorted(graph):
        if n not in index:
            visit(n)
    return out


def check(src, layers):
    problems = []
    by_folder = {folder: (name, uses) for name, folder, uses in layers}
    by_name = {name: folder for name, folder, _ in layers}
    for name, folder, uses in layers:
        for u in uses:
            if u not in by_name:
                problems.append(f'layers.txt: layer {name} uses {u}, which is not a layer')
    # what each layer may include: itself and the closure of what it uses
    visible = {}
    for name, folder, uses in layers:  # lowest first, so uses are done
        v = {folder}
        for u in uses:
            v |= visible.get(by_name.get(u, ''), set())
        visible[folder] = v
    folders = list(by_folder)
    edges = {}  # folder -> {module -> set(module)}
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(os.path.join(src, folder)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith(SOURCES):
                    continue
                path = os.path.join(dirpath, fn)
                rel = os.path.relpath(path, src)
                mine = owner(folders, rel)
                if mine != folder:
                    continue  # a subfolder that is a layer of its own
                with open(path, errors='replace') as f:
                    text = f.read()
                for m in INCLUDE.finditer(text):
                    inc = m.group(1)
                    line = text.count('\n', 0, m.start()) + 1
                    where = f'{rel}:{line}'
                    if '/' not in inc:
                        problems.append(f'{where}: #include "{inc}": name it from the project root '
                                        f'("{os.path.dirname(rel)}/{inc}")')
                        continue
                    target = owner(folders, inc)
                    if target is None:
                        if not inc.startswith('generated/'):
                            problems.append(f'{where}: #include "{inc}": not in any layer folder')
                        continue
                    if not os.path.isfile(os.path.join(src, inc)):
                        problems.append(f'{where}: #include "{inc}": no such file')
                        continue
                    if target not in visible[folder]:
                        name = by_folder[folder][0]
                        allowed = ', '.join(sorted(visible[folder] - {folder})) or 'nothing below it'
                        problems.append(f'{where}: #include "{inc}": layer {name} ({folder}/) may not use '
                                        f'{target}/ (it uses {allowed}); docs/architecture.md')
                        continue
                    if target == folder and module_of(inc) != module_of(rel):
                        edges.setdefault(folder, {}).setdefault(module_of(rel), set()).add(module_of(inc))
    for folder in folders:
        graph = edges.get(folder, {})
        for n in list(graph):
            for m in graph[n]:
                graph.setdefault(m, set())
        for comp in circles(graph):
            links = [f'{n} -> {m}' for n in comp for m in sorted(graph[n]) if m in comp]
            problems.append(f'{folder}/: a circle among the modules {", ".join(comp)} '
                            f'(includes: {"; ".join(links)})')
    return problems


def self_test():
    """The check must find what it is for: an upward include, a circle."""
    failures = 0

    def tree(files):
        d = tempfile.mkdtemp(prefix='ovt-layers-')
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            with open(os.path.join(d, rel), 'w') as f:
                f.write(text)
        return d

    table = [('common', 'common', []), ('kernels', 'kernels', ['common']),
             ('trainer', 'trainer', ['common', 'kernels'])]
    good = {'common/err.h': '', 'kernels/a.h': '#include "common/err.h"\n',
            'kernels/a.c': '#include "kernels/a.h"\n', 'trainer/t.c': '#include "kernels/a.h"\n'}
    cases = [
        ('a good tree', good, 0),
        ('an upward include', dict(good, **{'kernels/a.c': '#include "trainer/t.h"\n', 'trainer/t.h': ''}), 1),
        ('a circle', dict(good, **{'kernels/a.h': '#include "kernels/b.h"\n',
                                   'kernels/b.h': '', 'kernels/b.c': '#include "kernels/a.h"\n'}), 1),
        ('a bare include', dict(good, **{'kernels/a.c': '#include "a.h"\n'}), 1),
        ('a missing file', dict(good, **{'trainer/t.c': '#include "kernels/zz.h"\n'}), 1),
    ]
    for what, files, want in cases:
        got = check(tree(files), table)
        if (len(got) > 0) != (want > 0):
            print(f'self-test: {what}: expected {"a problem" if want else "none"}, got {got}')
            failures += 1
    print(f'self-test: {len(cases) - failures} of {len(cases)} cases as expected')
    return 1 if failures else 0


def main(argv):
    if len(argv) == 2 and argv[1] == '--self-test':
        return self_test()
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    layers = read_layers(argv[2])
    problems = check(argv[1], layers)
    for p in problems:
        print(p)
    print(f'{len(layers)} layers, {len(problems)} problem(s)')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
