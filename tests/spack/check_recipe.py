#!/usr/bin/env python3
"""Static checks of dqntrader's Spack recipe against the CMake project it builds.

Usage (from the source root):
    python3 tests/spack/check_recipe.py \\
        --recipe spack/spack_repo/dqntrader/packages/dqntrader/package.py \\
        --repo-yaml spack/spack_repo/dqntrader/repo.yaml --cmake CMakeLists.txt [--cmake ...] \
        [--bootstrap scripts/bootstrap.sh] [--license-file LICENSE]

Spack is not needed: the recipe is parsed, never imported. The checks:
  * the recipe parses and compiles as Python 3 and imports only Spack's API (spack, spack.*,
    spack_repo.*);
  * repo.yaml names the namespace the recipe lives under (spack_repo/<namespace>/packages/<pkg>/),
    declares a Package API v2.x, and the class name is the one Spack derives from the package name;
  * every CMake option() named DQNTRADER_ENABLE_* is set by exactly one
    self.define_from_variant("OPTION", "variant"), every define_from_variant names an option()
    of the project and a declared variant, and every declared variant (plus "cuda" when the class
    derives from CudaPackage) is used by one;
  * every REQUIRED find_package() of the project (the CMakeLists.txt files given and the
    directories they add_subdirectory()) has a Spack package among the depends_on() names;
  * conflicts() forbid +cuda together with +openmp, and ~cuda together with ~openmp;
  * the recipe declares its license with exactly one license("SPDX-ID") of a literal
    identifier; with --license-file, that file holds the text of that license;
  * the recipe's depends_on("cmake@X:") asks for the version the first CMakeLists.txt's
    cmake_minimum_required(VERSION X) names;
  * with --bootstrap: the recipe's unconditional depends_on("kokkos@LOW:HIGH") admits every
    Kokkos version the bootstrap (and so CI) builds, starts at the lowest of them and ends with
    the highest major version among them (a newer major release is excluded until CI builds it).

Exit status: 0 when every check passes, 1 otherwise (each failure on its own line); 2 for a
command line argparse rejects.
"""

import argparse
import ast
import os
import re
import sys

# find_package() name -> Spack package name.
SPACK_NAME_OF = {
    "Kokkos": "kokkos",
    "KokkosKernels": "kokkos-kernels",
    "CUDAToolkit": "cuda",
    "CLI11": "cli11",
    "nlohmann_json": "nlohmann-json",
    "BLAS": "blas",
    "GTest": "googletest",
    "benchmark": "benchmark",
    "MPI": "mpi",
    "ONNX": "onnx",
    "Protobuf": "protobuf",
    "Python": "python",
    "pybind11": "py-pybind11",
}

# SPDX identifier -> a pattern the license file's text must match (whitespace-insensitive).
LICENSE_TEXT_OF = {
    "Apache-2.0": r"Apache License\s+Version 2\.0, January 2004.*END OF TERMS AND CONDITIONS",
}

OPTION_PREFIX = "DQNTRADER_ENABLE_"
SPACK_API_MODULE = re.compile(r"^(spack|spack\.[A-Za-z0-9_.]+|spack_repo\.[A-Za-z0-9_.]+)$")
API_VERSION = re.compile(r"^v(\d+)\.(\d+)$")
PACKAGE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class Problems:
    def __init__(self):
        self.items = []

    def add(self, message):
        self.items.append(message)


# --- CMake ------------------------------------------------------------------------------------


def strip_cmake_comments(text):
    """Drops bracket comments and line comments, keeping quoted strings intact."""
    text = re.sub(r"#\[(=*)\[.*?\]\1\]", "", text, flags=re.S)
    out = []
    for line in text.splitlines():
        kept, quoted, i = [], False, 0
        while i < len(line):
            c = line[i]
            if c == "\\" and quoted:
                kept.append(line[i : i + 2])
                i += 2
                continue
            if c == '"':
                quoted = not quoted
            elif c == "#" and not quoted:
                break
            kept.append(c)
            i += 1
        out.append("".join(kept))
    return "\n".join(out)


def cmake_commands(text, name):
    """Argument strings of every call of the CMake command `name` (case-insensitive)."""
    calls = []
    for match in re.finditer(r"\b%s\s*\(" % re.escape(name), text, flags=re.I):
        depth, i = 1, match.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        calls.append(text[match.end() : i - 1])
    return calls


def read_cmake(paths, problems):
    """Options and find_package() calls of the given CMakeLists.txt files and their
    add_subdirectory() directories. Returns (options, find_packages, files read)."""
    options, packages, seen = {}, [], []
    queue = [os.path.abspath(p) for p in paths]
    while queue:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.append(path)
        try:
            with open(path, encoding="utf-8") as f:
                text = strip_cmake_comments(f.read())
        except OSError as e:
            problems.add(f"cannot read {path}: {e.strerror}")
            continue
        for args in cmake_commands(text, "option"):
            words = args.split()
            if words:
                options.setdefault(words[0], path)
        for args in cmake_commands(text, "find_package"):
            words = args.split()
            if words:
                packages.append((words[0], "REQUIRED" in words, path))
        for args in cmake_commands(text, "add_subdirectory"):
            words = args.split()
            if words and "$" not in words[0]:
                sub = os.path.join(os.path.dirname(path), words[0].strip('"'), "CMakeLists.txt")
                if os.path.isfile(sub):
                    queue.append(os.path.abspath(sub))
    return options, packages, seen


# --- the Kokkos versions CI builds ------------------------------------------------------------


def bootstrap_kokkos_versions(path, problems):
    """The versions scripts/bootstrap.sh accepts for --kokkos: the patterns of the first case
    statement over $kokkos_version, e.g. `3.4.01 | 4.6.01) ;;`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        problems.add(f"cannot read {path}: {e.strerror}")
        return []
    match = re.search(r'case "\$kokkos_version" in\s*\n\s*([0-9.| ]+)\)', text)
    if not match:
        problems.add(f"{path}: no `case \"$kokkos_version\" in` listing the versions it builds")
        return []
    return [v.strip() for v in match.group(1).split("|") if v.strip()]


def version_tuple(text):
    return tuple(int(part) for part in text.split("."))


def check_kokkos_range(depends, versions, bootstrap, recipe, problems):
    ranges = [s for s, when in depends if re.match(r"\s*kokkos@", s) and not when]
    if len(ranges) != 1:
        problems.add(
            f"{recipe}: expected one unconditional depends_on('kokkos@LOW:HIGH'), found "
            f"{len(ranges)}"
        )
        return
    match = re.match(r"\s*kokkos@([0-9.]+):([0-9.]+)\s*$", ranges[0])
    if not match:
        problems.add(f"{recipe}: the Kokkos range '{ranges[0]}' is not of the form kokkos@LOW:HIGH")
        return
    low, high = version_tuple(match.group(1)), version_tuple(match.group(2))

    def admits(v):  # Spack's LOW:HIGH: HIGH as a prefix includes every version under it
        return low <= v and v[: len(high)] <= high

    built = sorted(version_tuple(v) for v in versions)
    for v, text in zip(built, sorted(versions, key=version_tuple)):
        if not admits(v):
            problems.add(f"{recipe}: kokkos@{match.group(1)}:{match.group(2)} excludes {text}, "
                         f"which {bootstrap} builds")
    if built and low != built[0]:
        problems.add(f"{recipe}: the Kokkos range starts at {match.group(1)}, but the oldest "
                     f"version {bootstrap} builds is {'.'.join(map(str, built[0]))}")
    newest_major = built[-1][0] if built else None
    if built and high != (newest_major,):
        problems.add(f"{recipe}: the Kokkos range ends at {match.group(2)}; it must end with the "
                     f"newest major version {bootstrap} builds ({newest_major}), so that the next "
                     "major release is excluded until it is built and tested")


# --- license and CMake version -----------------------------------------------------------------


def check_license(licenses, license_file, recipe, problems):
    """licenses: (identifier or None, line) of every license() call in the recipe."""
    if not licenses:
        problems.add(f"{recipe}: no license(\"SPDX-ID\") directive")
        return
    if len(licenses) > 1:
        problems.add(
            f"{recipe}: {len(licenses)} license() directives (lines "
            f"{', '.join(str(line) for _, line in licenses)}); the project has one license"
        )
        return
    identifier, line = licenses[0]
    if not identifier:
        problems.add(f"{recipe}:{line}: license() needs a literal SPDX identifier")
        return
    if not license_file:
        return
    try:
        with open(license_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        problems.add(f"cannot read {license_file}: {e.strerror}")
        return
    pattern = LICENSE_TEXT_OF.get(identifier)
    if pattern is None:
        problems.add(
            f"{recipe}:{line}: license('{identifier}') has no known text to check "
            f"{license_file} against; add it to LICENSE_TEXT_OF in {os.path.basename(__file__)}"
        )
    elif not re.search(pattern, text, flags=re.S):
        problems.add(f"{recipe}:{line}: license('{identifier}'), but {license_file} is not its text")


def cmake_minimum_version(path, problems):
    """The VERSION of the cmake_minimum_required() in the CMakeLists.txt at path (the lower
    end of a min...max range), or None."""
    try:
        with open(path, encoding="utf-8") as f:
            text = strip_cmake_comments(f.read())
    except OSError as e:
        problems.add(f"cannot read {path}: {e.strerror}")
        return None
    for args in cmake_commands(text, "cmake_minimum_required"):
        match = re.search(r"\bVERSION\s+([0-9]+(?:\.[0-9]+)*)", args)
        if match:
            return match.group(1)
    problems.add(f"{path}: no cmake_minimum_required(VERSION ...)")
    return None


def check_cmake_version(depends, minimum, cmake_file, recipe, problems):
    """The recipe's build dependency on cmake starts at the project's minimum version."""
    if minimum is None:
        return
    lows = []
    for spec, _ in depends:
        match = re.match(r"\s*cmake@([0-9.]+):\s*$", spec)
        if match:
            lows.append(match.group(1))
        elif re.match(r"\s*cmake(\s|@|$)", spec):
            problems.add(f"{recipe}: depends_on('{spec}') is not of the form cmake@X:")
    if len(lows) != 1:
        problems.add(
            f"{recipe}: expected one depends_on('cmake@X:'), found {len(lows)}; "
            f"{cmake_file} needs CMake {minimum}"
        )
    else:

        def padded(v):
            parts = version_tuple(v)
            return parts + (0,) * (3 - len(parts))

        if padded(lows[0]) != padded(minimum):
            problems.add(
                f"{recipe}: depends_on('cmake@{lows[0]}:'), but {cmake_file} has "
                f"cmake_minimum_required(VERSION {minimum})"
            )


# --- repo.yaml --------------------------------------------------------------------------------


def read_repo_yaml(path, problems):
    """The keys under the top-level `repo:` mapping of a simple repo.yaml."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        problems.add(f"cannot read {path}: {e.strerror}")
        return None
    keys, in_repo = {}, False
    for raw in lines:
        line = re.sub(r"\s+#.*$", "", raw).rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            in_repo = line == "repo:"
            continue
        if in_repo:
            key, sep, value = line.strip().partition(":")
            if sep:
                keys[key.strip()] = value.strip().strip("'\"")
    if not keys:
        problems.add(f"{path}: no 'repo:' mapping with keys")
    return keys


def check_layout(recipe, repo_yaml, keys, class_names, problems):
    """The recipe sits at <repo root>/packages/<pkg dir>/package.py and the repo root at
    .../spack_repo/<namespace as directories>, the way Spack (Package API v2) finds it."""
    namespace = keys.get("namespace", "")
    api = keys.get("api", "")
    if not namespace:
        problems.add(f"{repo_yaml}: repo.namespace is missing")
    match = API_VERSION.match(api)
    if not match:
        problems.add(f"{repo_yaml}: repo.api must be of the form vX.Y (got {api!r})")
    elif int(match.group(1)) != 2:
        problems.add(f"{repo_yaml}: repo.api {api} is not a v2.x Package API (spack_repo layout)")

    root = os.path.dirname(os.path.abspath(repo_yaml))
    subdir = keys.get("subdirectory", "packages")
    recipe_abs = os.path.abspath(recipe)
    pkg_dir = os.path.dirname(recipe_abs)
    if os.path.basename(recipe_abs) != "package.py":
        problems.add(f"{recipe}: a recipe file must be named package.py")
    if os.path.dirname(pkg_dir) != os.path.join(root, subdir):
        problems.add(
            f"{recipe}: not under {os.path.join(root, subdir)}/<package>/ (the repository "
            f"that {repo_yaml} describes)"
        )
    marker = os.sep + "spack_repo" + os.sep
    if marker not in root + os.sep:
        problems.add(f"{root}: a v2 repository lives under a directory named spack_repo")
    else:
        derived = (root + os.sep).rpartition(marker)[2].rstrip(os.sep).replace(os.sep, ".")
        if namespace and derived != namespace:
            problems.add(
                f"{repo_yaml}: namespace {namespace!r} does not match the directories under "
                f"spack_repo/ ({derived!r})"
            )

    directory = os.path.basename(pkg_dir)
    name = directory.lstrip("_").replace("_", "-")
    if not PACKAGE_NAME.match(name):
        problems.add(f"{recipe}: '{directory}' is not a valid package directory name")
        return
    expected_class = "".join(part.capitalize() for part in re.split(r"[-_]", name))
    if directory[0] == "_":
        expected_class = "_" + expected_class
    if expected_class not in class_names:
        problems.add(
            f"{recipe}: package '{name}' needs a class named {expected_class} "
            f"(found: {', '.join(sorted(class_names)) or 'none'})"
        )


# --- the recipe -------------------------------------------------------------------------------


def literal_prefix(node):
    """The string value of a str constant, or the constant head of an f-string, else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        head = []
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                head.append(part.value)
            else:
                break
        return "".join(head)
    return None


def call_name(call):
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def keyword(call, name):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def base_names(cls):
    names = set()
    for base in cls.bases:
        if isinstance(base, ast.Name):
            names.add(base.id)
        elif isinstance(base, ast.Attribute):
            names.add(base.attr)
    return names


def enabled_variants(spec):
    """Variant names a spec string turns on for the package itself (dependencies dropped)."""
    own = spec.split("^", 1)[0]
    return set(re.findall(r"\+\+?([A-Za-z0-9_-]+)", own)), set(
        re.findall(r"~~?([A-Za-z0-9_-]+)", own)
    )


def read_recipe(path, problems):
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        problems.add(f"cannot read {path}: {e.strerror}")
        return None
    try:
        tree = ast.parse(source, filename=path)
        compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as e:
        problems.add(f"{path}:{e.lineno}: not valid Python 3: {e.msg}")
        return None
    return tree


def check_imports(tree, path, problems):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.add(
                    f"{path}:{node.lineno}: relative import (only Spack's API may be used)"
                )
                continue
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            if not SPACK_API_MODULE.match(module):
                problems.add(
                    f"{path}:{node.lineno}: imports '{module}'; a recipe imports only from "
                    "spack, spack.* and spack_repo.*"
                )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", required=True, help="the package.py to check")
    parser.add_argument("--repo-yaml", required=True, help="repo.yaml of its Spack repository")
    parser.add_argument(
        "--cmake",
        required=True,
        action="append",
        help="a CMakeLists.txt of the project (repeatable; add_subdirectory() is followed)",
    )
    parser.add_argument(
        "--bootstrap", help="scripts/bootstrap.sh: check the Kokkos range against its versions"
    )
    parser.add_argument(
        "--license-file", help="the project's LICENSE: check it against the recipe's license()"
    )
    args = parser.parse_args(argv)
    problems = Problems()

    tree = read_recipe(args.recipe, problems)
    keys = read_repo_yaml(args.repo_yaml, problems)
    options, packages, cmake_files = read_cmake(args.cmake, problems)
    if tree is None or keys is None:
        return report(problems, args)

    check_imports(tree, args.recipe, problems)
    classes = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    check_layout(args.recipe, args.repo_yaml, keys, {c.name for c in classes}, problems)

    # Variants: declared with variant("name", ...) in a class body, plus CudaPackage's "cuda".
    variants = {}
    from_variant = []  # (cmake variable, variant, line)
    depends, conflicts = [], []  # spec strings
    depends_when = []  # (spec, condition) of every depends_on: its when= or its with when() block
    licenses = []  # (identifier or None, line) of every license() directive
    conditioned = {}  # id of a call inside a `with when(...)` block -> that block's condition
    for block in ast.walk(tree):
        if isinstance(block, ast.With):
            for item in block.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and call_name(call) == "when" and call.args:
                    condition = literal_prefix(call.args[0]) or "?"
                    for inner in ast.walk(block):
                        conditioned.setdefault(id(inner), condition)
    uses_cuda_package = any("CudaPackage" in base_names(c) for c in classes)
    if uses_cuda_package:
        variants["cuda"] = "CudaPackage"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = call_name(node)
        first = literal_prefix(node.args[0]) if node.args else None
        if name == "variant" and isinstance(node.func, ast.Name):
            if first is None:
                problems.add(f"{args.recipe}:{node.lineno}: variant() without a literal name")
            else:
                variants.setdefault(first, f"line {node.lineno}")
        elif name == "define_from_variant":
            cmake_var = first
            variant_node = node.args[1] if len(node.args) > 1 else keyword(node, "variant")
            variant = literal_prefix(variant_node) if variant_node is not None else None
            if variant_node is None and cmake_var:
                variant = cmake_var.lower()
            if not cmake_var or variant is None or isinstance(variant_node, ast.JoinedStr):
                problems.add(
                    f"{args.recipe}:{node.lineno}: define_from_variant() needs literal "
                    "arguments for this check"
                )
                continue
            from_variant.append((cmake_var, variant, node.lineno))
        elif name == "depends_on" and isinstance(node.func, ast.Name) and first is not None:
            depends.append(first)
            when = keyword(node, "when")
            condition = (literal_prefix(when) if when is not None else None) or ""
            depends_when.append((first, condition or conditioned.get(id(node), "")))
        elif name == "license" and isinstance(node.func, ast.Name):
            licenses.append((first, node.lineno))
        elif name == "conflicts" and isinstance(node.func, ast.Name) and first is not None:
            when = node.args[1] if len(node.args) > 1 else keyword(node, "when")
            conflicts.append((first, (literal_prefix(when) if when is not None else None) or ""))

    # CMake options <-> define_from_variant <-> variants.
    project_options = sorted(o for o in options if o.startswith(OPTION_PREFIX))
    if not project_options:
        problems.add(f"no option() named {OPTION_PREFIX}* in {', '.join(cmake_files)}")
    for option in project_options:
        setters = [line for var, _, line in from_variant if var == option]
        if len(setters) != 1:
            problems.add(
                f"CMake option {option} is set by {len(setters)} define_from_variant() calls "
                f"(lines {setters or '-'}); it needs exactly one"
            )
    used = set()
    for cmake_var, variant, line in from_variant:
        if cmake_var not in options:
            problems.add(
                f"{args.recipe}:{line}: define_from_variant('{cmake_var}', ...) names no "
                "option() of the project"
            )
        if variant not in variants:
            problems.add(
                f"{args.recipe}:{line}: define_from_variant(..., '{variant}') uses an undeclared "
                "variant"
            )
        used.add(variant)
    for variant, where in sorted(variants.items()):
        if variant not in used:
            problems.add(
                f"variant '{variant}' ({where}) is passed to CMake by no define_from_variant()"
            )

    # find_package() -> depends_on().
    dependency_names = set()
    for spec in depends:
        match = re.match(r"\s*([a-z0-9][a-z0-9_-]*)", spec)
        if match:
            dependency_names.add(match.group(1))
    for package, required, where in packages:
        if not required:
            continue
        spack_name = SPACK_NAME_OF.get(package)
        if spack_name is None:
            problems.add(
                f"{where}: find_package({package} REQUIRED) has no known Spack package; add it "
                f"to SPACK_NAME_OF in {os.path.basename(__file__)}"
            )
        elif spack_name not in dependency_names:
            problems.add(
                f"{where}: find_package({package} REQUIRED) but the recipe has no "
                f"depends_on('{spack_name}...')"
            )

    check_license(licenses, args.license_file, args.recipe, problems)
    check_cmake_version(
        depends_when,
        cmake_minimum_version(args.cmake[0], problems),
        args.cmake[0],
        args.recipe,
        problems,
    )

    if args.bootstrap:
        versions = bootstrap_kokkos_versions(args.bootstrap, problems)
        check_kokkos_range(depends_when, versions, args.bootstrap, args.recipe, problems)

    # One backend per build.
    def forbids(wanted_on, wanted_off):
        for spec, when in conflicts:
            on_spec, off_spec = enabled_variants(spec)
            on_when, off_when = enabled_variants(when)
            if wanted_on <= on_spec | on_when and wanted_off <= off_spec | off_when:
                return True
        return False

    if not forbids({"cuda", "openmp"}, set()):
        problems.add(f"{args.recipe}: no conflicts() forbids +cuda together with +openmp")
    if not forbids(set(), {"cuda", "openmp"}):
        problems.add(f"{args.recipe}: no conflicts() forbids ~cuda together with ~openmp")

    if not problems.items:
        print(
            f"check_recipe: OK: {len(project_options)} options "
            f"({', '.join(project_options)}) set from variants "
            f"{', '.join(sorted(variants))}; dependencies cover "
            f"{', '.join(sorted({p for p, r, _ in packages if r}))}; license "
            f"{licenses[0][0]}"
        )
    return report(problems, args)


def report(problems, args):
    if not problems.items:
        return 0
    for message in problems.items:
        print(f"check_recipe: FAIL: {message}", file=sys.stderr)
    print(
        f"check_recipe: {len(problems.items)} problem(s) in {args.recipe} "
        f"(repo.yaml {args.repo_yaml})",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
