#!/usr/bin/env python3
"""Generate core/schema/k8s-v1.33.json: the Kubernetes v1.33 API type definitions kapi serves.

Two public sources are merged, neither of them kapi's own:
  * the v1.33 OpenAPI definitions (descriptions, types, required fields, x-kubernetes-* list/map/patch
    markers, group-version-kinds), as packaged in the `kubernetes-validate` wheel on PyPI, which keeps
    them from the upstream `api/openapi-spec`;
  * the protobuf field numbers and wire kinds of every message, read from the prost-generated source
    of the `k8s-pb` crate (upstream `generated.proto` files).

The output is a swagger-2.0 `definitions` object; every property carries `x-kapi-proto` =
[tag, kind] (kind: int32|int64|bool|string|bytes|double|message|map:<value kind>) and every definition
built from a protobuf message carries `x-kapi-proto-message`. Run it from the repository root:

    python3 tools/gen_k8s_schema.py            # downloads the wheel with pip, finds k8s-pb in ~/.cargo
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile

K8S_VERSION = "v1.33.0"
VALIDATE_WHEEL = "kubernetes-validate==1.37.0"
K8S_PB = "k8s-pb-0.9.0"
# The versions v1.33 no longer serves but v1.20 components ask for, as kube v1.24 defined them
# (served behind --runtime-config): definitions from an older wheel, field numbers from k8s-pb 0.1.
LEGACY_VERSION = "v1.24.0"
LEGACY_WHEEL = "kubernetes-validate==1.28.0"
LEGACY_K8S_PB = "k8s-pb-0.1.0"
LEGACY_PREFIXES = (
    "io.k8s.api.policy.v1beta1.PodDisruptionBudget",
    "io.k8s.api.batch.v1beta1.",
    "io.k8s.api.discovery.v1beta1.",
)
OUT = "core/schema/k8s-v1.33.json"

# Types whose JSON form is not their protobuf message's shape; the codec handles them by name.
SPECIAL = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": {"type": "string", "format": "date-time"},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
}
SPECIAL_DESCRIPTIONS = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": "Quantity is a fixed-point representation of a number. It provides convenient marshaling/unmarshaling in JSON and YAML, in addition to String() and AsInt64() accessors.",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "IntOrString is a type that can hold an int32 or a string.  When used in JSON or YAML marshalling and unmarshalling, it produces or consumes the inner type.  This allows you to have, for example, a JSON field that can accept a name or number.",
}


def find_k8s_pb(crate):
    """The crate's source in cargo's registry, downloaded with `cargo info` when missing."""
    pattern = os.path.expanduser(f"~/.cargo/registry/src/*/{crate}/src")
    if not glob.glob(pattern):
        name, version = crate.rsplit("-", 1)
        subprocess.run(["cargo", "info", f"{name}@{version}"], check=True, stdout=subprocess.DEVNULL)
    return glob.glob(pattern)[0]


def load_definitions(wheel_spec, version):
    tmp = tempfile.mkdtemp()
    subprocess.check_call([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, wheel_spec])
    wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
    with zipfile.ZipFile(wheel) as z:
        name = f"kubernetes_validate/kubernetes-json-schema/{version}-local/_definitions.json"
        doc = json.loads(z.read(name))
        return doc.get("$defs") or doc["definitions"]


FIELD_RE = re.compile(r"#\[prost\(([^\]]*?)\)\]\s*pub (r#)?(\w+):\s*", re.S)


def rust_type_at(text, start):
    """The Rust type starting at `start`, up to the comma that closes the field."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            return text[start:i]
    return text[start:]
STRUCT_RE = re.compile(r"pub struct (\w+) \{(.*?)\n\}", re.S)


def rust_path_to_definition_prefix(parts):
    top = parts[0].replace("_", "-")
    return ".".join(["io.k8s", top] + parts[1:])


def parse_k8s_pb(root):
    messages = {}
    for path in glob.glob(os.path.join(root, "**", "mod.rs"), recursive=True):
        rel = os.path.relpath(os.path.dirname(path), root)
        if rel == ".":
            continue
        modparts = rel.split(os.sep)
        src = open(path).read()
        for sm in STRUCT_RE.finditer(src):
            sname, body = sm.group(1), sm.group(2)
            fields = []
            for fm in FIELD_RE.finditer(body + "\n"):
                attr, fname = fm.group(1), fm.group(3)
                ftype = " ".join(rust_type_at(body, fm.end()).split())
                tag = int(re.search(r'tag\s*=\s*"(\d+)"', attr).group(1))
                kind = attr.split(",")[0].strip()
                repeated = "repeated" in attr
                mapm = re.match(r'(btree_|hash_)?map\s*=\s*"(\w+), *(\w+)"', attr)
                if mapm:
                    kind = "map:" + mapm.group(3)
                elif kind.startswith("bytes"):
                    kind = "bytes"
                msg = None
                if kind in ("message", "map:message"):
                    msg = resolve_type(modparts, ftype)
                fields.append({"name": fname, "tag": tag, "kind": kind, "repeated": repeated, "message": msg})
            full = rust_path_to_definition_prefix(modparts) + "." + sname
            messages[norm(full)] = fields
            PROTO_NAMES[norm(full)] = full
    return messages


def resolve_type(modparts, ftype):
    # The innermost type path of e.g. Option<super::super::x::y::T> or BTreeMap<String, T>.
    inner = re.findall(r"((?:super::)*(?:[A-Za-z_]\w*::)*[A-Z]\w*)", ftype)[-1]
    segs = inner.split("::")
    ups = 0
    while segs and segs[0] == "super":
        segs.pop(0)
        ups += 1
    base = modparts[: len(modparts) - ups] if ups else modparts
    return norm(rust_path_to_definition_prefix(base + segs[:-1]) + "." + segs[-1])


PROTO_NAMES = {}


def find_field(messages, fields, pname, json_names, via=()):
    """A JSON property is a field of the message or, for Go's inlined embedded structs, a field of
    an embedded message (a message-typed field with no JSON property of its own); `via` is the
    list of tags of the embedded messages on the way."""
    for f in fields:
        if norm(f["name"]) == pname:
            return list(via), f
    for f in fields:
        if f["kind"] == "message" and not f["repeated"] and norm(f["name"]) not in json_names:
            inner = messages.get(f["message"])
            if inner:
                found = find_field(messages, inner, pname, json_names, via + (f["tag"],))
                if found:
                    return found
    return None


def norm(name):
    return re.sub(r"[^0-9a-z.]", "", name.lower())


def to_swagger(node):
    """kubernetes-validate's JSON-schema form back to swagger 2.0 (nullable type lists, $defs refs)."""
    if isinstance(node, list):
        return [to_swagger(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for k, v in node.items():
        if k == "type" and isinstance(v, list):
            v = [t for t in v if t != "null"][0]
        elif k == "$ref" and isinstance(v, str):
            v = "#/definitions/" + v.split("/")[-1]
        else:
            v = to_swagger(v)
        out[k] = v
    return out


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    defs = load_definitions(VALIDATE_WHEEL, K8S_VERSION)
    legacy = load_definitions(LEGACY_WHEEL, LEGACY_VERSION)
    legacy_messages = parse_k8s_pb(find_k8s_pb(LEGACY_K8S_PB))
    messages = parse_k8s_pb(find_k8s_pb(K8S_PB))
    for name, d in legacy.items():
        if name.startswith(LEGACY_PREFIXES):
            defs[name] = d
            messages[norm(name)] = legacy_messages[norm(name)]
    canonical = dict(PROTO_NAMES)
    canonical.update({norm(n): n for n in defs})
    canonical.update({norm(n): n for n in EXTRA})
    out = {}
    unmatched = []
    for name, d in sorted(defs.items()):
        if name in SPECIAL:
            sd = dict(SPECIAL[name])
            sd["description"] = d.get("description") or SPECIAL_DESCRIPTIONS.get(name, "")
            if norm(name) in messages:
                sd["x-kapi-proto-message"] = name
            out[name] = sd
            continue
        d = to_swagger(d)
        props = d.get("properties", {})
        gvk = d.get("x-kubernetes-group-version-kind")
        for pname in ("apiVersion", "kind"):
            if pname in props and gvk:
                props[pname].pop("enum", None)
        fields = messages.get(norm(name))
        if fields is not None:
            d["x-kapi-proto-message"] = name
            for pname, p in props.items():
                found = find_field(messages, fields, norm(pname), set(map(norm, props)))
                if found is None:
                    if pname not in ("apiVersion", "kind"):
                        unmatched.append(f"{name}.{pname}")
                    continue
                via, f = found
                proto = [f["tag"], f["kind"]]
                if f["message"] and f["message"] not in map(norm, wanted_refs(p)):
                    proto.append(canonical[f["message"]])
                p["x-kapi-proto"] = proto
                if via:
                    p["x-kapi-proto-via"] = via
            d["x-kapi-order"] = go_order(messages, fields, props, gvk is not None)
        out[name] = d
    # Messages kapi serves that the OpenAPI document does not describe.
    for name, props in EXTRA.items():
        fields = {norm(f["name"]): f for f in messages[norm(name)]}
        kind = name.rsplit(".", 1)[1]
        d = {"type": "object", "properties": {}, "x-kapi-proto-message": name,
             "x-kubernetes-group-version-kind": [{"group": "meta.k8s.io", "version": "v1", "kind": kind}]}
        for pname, p in props.items():
            p = dict(p)
            f = fields.get(norm(pname))
            if f:
                p["x-kapi-proto"] = [f["tag"], f["kind"]]
            d["properties"][pname] = p
        out[name] = d
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        fh.write("{\n")
        items = sorted(out.items())
        for i, (k, v) in enumerate(items):
            fh.write(json.dumps(k) + ":" + json.dumps(v, sort_keys=True, separators=(",", ":")))
            fh.write(",\n" if i + 1 < len(items) else "\n")
        fh.write("}\n")
    print(f"wrote {OUT}: {len(out)} definitions")
    if unmatched:
        print("properties with no protobuf field:", ", ".join(unmatched[:40]), file=sys.stderr)


def go_order(messages, fields, props, typed):
    """The JSON properties in the order Go's encoder writes them: the struct's field order, which
    generated.proto keeps (not its tag order), with inlined structs' fields in their place and
    TypeMeta's kind and apiVersion first; properties with no field last, sorted."""
    names = set(map(norm, props))
    keyed = []
    for pname in props:
        found = find_field(messages, fields, norm(pname), names)
        if found is None:
            continue
        via, f = found
        key, msg = [], fields
        for tag in via:
            i = next(i for i, x in enumerate(msg) if x["tag"] == tag)
            key.append(i)
            msg = messages[msg[i]["message"]]
        key.append(msg.index(f))
        keyed.append((key, pname))
    order = ["kind", "apiVersion"] if typed else []
    order += [p for _, p in sorted(keyed)]
    order += sorted(p for p in props if p not in order)
    return order


def wanted_refs(p):
    refs = set()
    for node in (p, p.get("items", {}), p.get("additionalProperties", {})):
        if isinstance(node, dict) and "$ref" in node:
            refs.add(node["$ref"].split("/")[-1])
    return refs


META = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1."
EXTRA = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"$ref": META + "ObjectMeta"},
    },
    "io.k8s.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"$ref": META + "ListMeta"},
        "items": {"type": "array", "items": {"$ref": META + "PartialObjectMetadata"}},
    },
}

if __name__ == "__main__":
    main()
