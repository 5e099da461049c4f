#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Offline checks of the deployment files under deploy/ (docs/deploy.md): what can be verified without a
# Docker engine, a Kubernetes cluster or a running systemd.
#
#   check-deploy.sh SOURCE_DIR BIN_DIR     (BIN_DIR holds the built baton, baton-agent, batond and fenced-store)
#
# Needs python3 with PyYAML (Debian: python3-yaml) and openssl (the Compose setup's certificates), both in
# deploy/install-deps.sh's `test` profile. Uses ldd and dpkg, systemd-analyze and kubectl when present and
# says which checks it skipped without them. Runs every check, prints one line per check
# (ok/FAIL/skip) and exits 1 if any failed.
set -euo pipefail

if (($# != 2)); then
  echo "usage: $0 SOURCE_DIR BIN_DIR" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
bin=$(cd "$2" && pwd)

if ! command -v python3 >/dev/null || ! python3 -c 'import yaml' 2>/dev/null; then
  echo "check-deploy: FAIL: python3 with PyYAML is needed to parse the YAML files (Debian: python3-yaml)" >&2
  exit 1
fi
if ! command -v openssl >/dev/null; then
  echo "check-deploy: FAIL: openssl is needed to check the Compose setup's certificates (Debian: openssl)" >&2
  exit 1
fi
for exe in baton baton-agent batond fenced-store; do
  if [[ ! -x $bin/$exe ]]; then
    echo "check-deploy: FAIL: $bin/$exe is missing: build it first (cmake --build --preset dev)" >&2
    exit 1
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

python3 - "$src" "$bin" "$work" <<'PY'
import glob, json, os, re, select, shlex, shutil, subprocess, sys
import yaml

src, bin_dir, work = sys.argv[1:4]
deploy = os.path.join(src, "deploy")
failures = []

def rel(path):
    return os.path.relpath(path, src)

def ok(msg):
    print(f"ok: {msg}")

def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}")

def skip(msg):
    print(f"skip: {msg}")

def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, **kw)

def argv_of(value):
    """A command given as a list or as one string (compose allows both)."""
    return shlex.split(value) if isinstance(value, str) else [str(a) for a in value or []]

def flag_value(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None

# ---- durations and the agent's stop time ----------------------------------------------------------------

def agent_seconds(text):
    """An agent duration (docs/agent.md: 500ms, 10s, 1m30s) in seconds; compose's are written the same way."""
    parts = re.findall(r"(\d+)(ms|s|m|h)", str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text):
        raise ValueError(f"bad duration {text!r}")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(int(n) * scale[u] for n, u in parts)

def systemd_seconds(text):
    """A systemd time span (40, 40s, 1min 30s) in seconds."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    parts = re.findall(r"(\d+)\s*(ms|s|sec|m|min|h)\b", text)
    if not parts:
        raise ValueError(f"bad time span {text!r}")
    scale = {"ms": 0.001, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
    return sum(int(n) * scale[u] for n, u in parts)

def check_stop_timeout(what, timeout, config):
    """The supervisor's stop timeout must outlast the agent's own stop: shutdown_grace, then the largest job
    grace (defaults 20s and 5s). Otherwise a job is SIGKILLed mid-shutdown and the lease is not released."""
    config = config or {}
    try:
        grace = max([agent_seconds(j.get("grace", "5s")) for j in config.get("jobs") or []] or [0])
        need = agent_seconds(config.get("shutdown_grace", "20s")) + grace
    except ValueError as e:
        fail(f"{what}: cannot compute the agent's stop time: {e}")
        return
    if timeout > need:
        ok(f"{what}: stop timeout {timeout:g}s > shutdown_grace + job grace ({need:g}s)")
    else:
        fail(f"{what}: stop timeout {timeout:g}s does not exceed the agent's shutdown_grace + job grace "
             f"({need:g}s): the agent would be killed before its jobs stop and its lease is released")

# ---- the binaries' own checks ---------------------------------------------------------------------------

def check_flags(argv, where):
    """The binary (from BIN_DIR) knows every flag of a command line: with --help appended it parses them all
    and exits 0, or names the unknown one and exits 2."""
    r = run([os.path.join(bin_dir, os.path.basename(argv[0])), *argv[1:], "--help"], timeout=20)
    if r.returncode == 0:
        ok(f"{where}: {os.path.basename(argv[0])} accepts {' '.join(argv[1:])}")
    else:
        fail(f"{where}: {' '.join(argv)}: {(r.stderr or r.stdout).strip()[:300]}")

TLS_FLAGS = ("--ca-file", "--cert", "--key")

def with_tls_stand_ins(path, flags):
    """The agent checks that its TLS files can be read; those a deployment names (/etc/baton/tls/...) exist
    only where it runs. Each missing one is replaced, in a copy of the file and in the flags, by a readable
    stand-in; only the path strings change, so errors still point at the right lines."""
    with open(path) as f:
        text = f.read()
    config = yaml.safe_load(text) or {}
    tls = config.get("tls") if isinstance(config, dict) else None
    paths = [v for v in (tls or {}).values() if isinstance(v, str)] if isinstance(tls, dict) else []
    flags = list(flags)
    flag_paths = [flags[i + 1] for i, a in enumerate(flags[:-1]) if a in TLS_FLAGS]
    if not paths and not flag_paths:
        return path, flags
    stand_in = os.path.join(work, "tls-stand-in.pem")
    open(stand_in, "w").close()
    for p in paths:
        if not os.path.exists(p):
            text = text.replace(p, stand_in)
    flags = [stand_in if i > 0 and flags[i - 1] in TLS_FLAGS and not os.path.exists(a) else a
             for i, a in enumerate(flags)]
    copy = os.path.join(work, "tls-" + os.path.basename(path))
    with open(copy, "w") as f:
        f.write(text)
    return copy, flags

def check_agent_config(path, flags=(), label=None):
    label = label or rel(path)
    path, flags = with_tls_stand_ins(path, flags)
    r = run([os.path.join(bin_dir, "baton-agent"), "--check-config", path, *flags], timeout=20)
    label += " with " + " ".join(flags) if flags else ""
    if r.returncode == 0:
        ok(f"baton-agent --check-config {label}")
    else:
        fail(f"baton-agent --check-config {label}: {(r.stderr or r.stdout).strip()}")

# ---- 1. YAML: every file parses; those neither compose nor Kubernetes are agent configurations -----------

docs = {}  # path -> its YAML documents

def is_k8s(path):
    return path.startswith(os.path.join(deploy, "k8s") + os.sep)

def is_compose(path):
    return any(isinstance(d, dict) and "services" in d for d in docs.get(path, []))

def check_yaml():
    for path in sorted(glob.glob(os.path.join(deploy, "**", "*.y*ml"), recursive=True)):
        try:
            with open(path) as f:
                docs[path] = [d for d in yaml.safe_load_all(f) if d is not None]
            ok(f"YAML parses: {rel(path)}")
        except yaml.YAMLError as e:
            fail(f"YAML does not parse: {rel(path)}: {e}")
    for path in docs:
        if not is_k8s(path) and not is_compose(path):
            check_agent_config(path)

# ---- 2. Dockerfiles -------------------------------------------------------------------------------------

images = {}  # Dockerfile path -> {"target", "entrypoint", "healthcheck"}
slim_base = {"libc6", "libgcc-s1", "libstdc++6"}   # already in debian:12-slim
sanitizer_runtime = re.compile(r"^lib(asan|ubsan|tsan|lsan)\d*$")

def dockerfile_instructions(path):
    """[(INSTRUCTION, arguments)], continuation lines joined, comments dropped."""
    out, pending = [], ""
    with open(path) as f:
        for line in f:
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            if text.endswith("\\"):
                pending += text[:-1] + " "
                continue
            word, _, rest = (pending + text).partition(" ")
            pending = ""
            out.append((word.upper(), rest.strip()))
    return out

def exec_form(text):
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) else None

def packages_of(libs):
    """The Debian package of each library, in one dpkg call (it is slow to start). With merged /usr a file
    is registered under /lib or /usr/lib, by its real name or its link's."""
    candidates = {}
    for lib in libs:
        for c in (lib, os.path.realpath(lib)):
            for p in (c, re.sub(r"^/lib/", "/usr/lib/", c), re.sub(r"^/usr/lib/", "/lib/", c)):
                candidates.setdefault(p, lib)
    owner = {}
    for line in run(["dpkg", "-S", *candidates]).stdout.splitlines():
        package, _, path = line.partition(": ")
        if path in candidates:
            owner.setdefault(candidates[path], package.split(":")[0])
    return {owner.get(lib, f"<no package for {lib}>") for lib in libs}

def configure_context(copies, cmake_args, cache={}):
    """Configures a tree holding only the COPYed sources, as the image's build does; its build dir or None."""
    key = (tuple(copies), tuple(cmake_args))
    if key not in cache:
        tree = os.path.join(work, f"context{len(cache)}")
        for source, dest in copies:
            to = os.path.normpath(os.path.join(tree, dest))
            if os.path.isdir(os.path.join(src, source)):
                shutil.copytree(os.path.join(src, source), to, dirs_exist_ok=True)
            else:
                os.makedirs(os.path.dirname(to), exist_ok=True)
                shutil.copy2(os.path.join(src, source), to)
        r = run(["cmake", "-S", tree, "-B", os.path.join(tree, "build"), *cmake_args])
        cache[key] = (os.path.join(tree, "build") if r.returncode == 0 else None, r.stdout[-2000:] + r.stderr[-2000:])
    return cache[key]

def project_version():
    """The version in CMakeLists.txt's project(), which the binaries' --version prints."""
    with open(os.path.join(src, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*\S+\s+VERSION\s+([0-9][0-9.]*)", f.read())
    return m.group(1) if m else None

# The images an operator works in also carry the baton CLI (docs/cli.md).
cli_images = ("batond", "baton-agent")
oci_labels = ("title", "description", "source", "licenses", "version")

def check_oci_labels(name, runtime, target):
    """The runtime stage's org.opencontainers.image.* labels: all of oci_labels, the title naming the image's
    program, Apache-2.0, and a version from ARG VERSION whose default is the project's version."""
    args, labels = {}, {}
    for i, a in runtime:
        if i == "ARG":
            key, _, default = a.partition("=")
            args[key.strip()] = default.strip().strip('"')
        elif i == "LABEL":
            for item in shlex.split(a):
                key, _, value = item.partition("=")
                labels[key] = (value, re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), value))
    prefix = "org.opencontainers.image."
    missing = [k for k in oci_labels if prefix + k not in labels]
    if missing:
        fail(f"{name}: the runtime stage has no LABEL {', '.join(prefix + k for k in missing)}")
        return
    raw_version, version = labels[prefix + "version"]
    problems = []
    if labels[prefix + "title"][1] != target:
        problems.append(f"title {labels[prefix + 'title'][1]!r} is not {target!r}")
    if labels[prefix + "licenses"][1] != "Apache-2.0":
        problems.append(f"licenses {labels[prefix + 'licenses'][1]!r} is not 'Apache-2.0' (LICENSE)")
    if not labels[prefix + "source"][1].startswith("https://"):
        problems.append(f"source {labels[prefix + 'source'][1]!r} is not an https:// URL")
    if not re.fullmatch(r"\$\{?VERSION\}?", raw_version) or "VERSION" not in args:
        problems.append(f"version {raw_version!r} does not come from a build ARG VERSION")
    elif version != project_version():
        problems.append(f"ARG VERSION defaults to {version!r}, CMakeLists.txt's project version is "
                        f"{project_version()!r}")
    if problems:
        fail(f"{name}: OCI labels: {'; '.join(problems)}")
    else:
        ok(f"{name}: OCI labels title={target} licenses=Apache-2.0 version=ARG VERSION ({version}), source, "
           "description")

def check_dockerfile(path):
    name = rel(path)
    ins = dockerfile_instructions(path)
    froms = [a for i, a in ins if i == "FROM"]
    if len(froms) < 2 or not froms[0].startswith("debian:12 ") or froms[-1].split()[0] != "debian:12-slim":
        fail(f"{name}: expected a debian:12 build stage and a debian:12-slim runtime stage, got FROM {froms}")
        return
    final = max(k for k, (i, _) in enumerate(ins) if i == "FROM")
    build, runtime = ins[:final], ins[final:]

    # The build stage: its COPY sources exist, and configuring a tree of only those sources the way the
    # stage does, then a dry run of its target, works (nothing the build reads is left out of the image).
    workdir, copies = "/", []   # copies: (source in the repository, destination relative to WORKDIR)
    for i, a in build:
        if i == "WORKDIR":
            workdir = a
        if i == "COPY" and not a.startswith("--from"):
            *sources, dest = shlex.split(a)
            into_dir = dest.endswith("/") or len(sources) > 1
            copies += [(s, os.path.join(dest, os.path.basename(s)) if into_dir else dest) for s in sources]
    missing = [s for s, _ in copies if not os.path.exists(os.path.join(src, s))]
    if missing:
        fail(f"{name}: COPY sources missing from the repository: {missing}")
    else:
        ok(f"{name}: COPY sources exist ({len(copies)})")
    runs = " && ".join(a for i, a in build if i == "RUN")
    # Only the `build` profile: the test and bench packages (etcd, clang, Redis...) have no place in an image.
    profiles = [p.split() for p in re.findall(r"bash deploy/install-deps\.sh((?:[ \t]+[\w-]+)*)", runs)]
    if not profiles:
        fail(f"{name}: the build stage does not run bash deploy/install-deps.sh")
    elif any(p != ["build"] for p in profiles):
        fail(f"{name}: the build stage runs install-deps.sh with {profiles}, not the `build` profile alone")
    else:
        ok(f"{name}: the build stage installs install-deps.sh's `build` profile only")
    configure = re.search(r"cmake -S \. -B build([^&]*)", runs)
    targets = re.search(r"cmake --build build --target ([^&]+)", runs)
    if not configure or not targets:
        fail(f"{name}: no 'cmake -S . -B build ...' and 'cmake --build build --target X' in the build stage")
        return
    targets = targets.group(1).split()
    target = targets[0]   # the image's own program; the others ship beside it
    if not missing:
        build_dir, log = configure_context(copies, shlex.split(configure.group(1)))
        if not build_dir:
            fail(f"{name}: cmake cannot configure the COPYed sources:\n{log}")
        else:
            r = run(["cmake", "--build", build_dir, "--target", *targets, "--", "-n"])
            if r.returncode == 0:
                ok(f"{name}: builds {' '.join(targets)} from the COPYed sources (targets exist; dry run)")
            else:
                fail(f"{name}: building {' '.join(targets)}: {(r.stderr or r.stdout).strip()[-500:]}")

    # The runtime stage: runs the binary built above as a non-root user, with the libraries it links.
    def copied(program):
        """Where the runtime stage COPYs a program from the build stage, or None."""
        built = f"{workdir.rstrip('/')}/build/bin/{program}"
        return next((c[2] for c in (shlex.split(a) for i, a in runtime if i == "COPY" and a.startswith("--from="))
                     if c[1] == built), None)
    built, dest = f"{workdir.rstrip('/')}/build/bin/{target}", copied(target)
    entry = next((exec_form(a) for i, a in runtime if i == "ENTRYPOINT"), None)
    if dest is None:
        fail(f"{name}: the runtime stage does not COPY {built} from the build stage")
    else:
        dest += target if dest.endswith("/") else ""
        if not entry or entry[0] != dest:
            fail(f"{name}: ENTRYPOINT {entry} (exec form) does not run the copied binary {dest}")
        else:
            check_flags(entry, f"{name} ENTRYPOINT")
    data_dir = flag_value(entry or [], "--data-dir")
    if data_dir and not any(i == "VOLUME" and data_dir in a.split() for i, a in runtime):
        fail(f"{name}: the data directory {data_dir} is not a VOLUME")
    users = [a for i, a in runtime if i == "USER"]
    if not users or users[-1].split(":")[0] in ("root", "0"):
        fail(f"{name}: the runtime stage must switch to a non-root USER")
    for required in ("EXPOSE", "HEALTHCHECK"):
        if not any(i == required for i, _ in runtime):
            fail(f"{name}: no {required} in the runtime stage")
    healthcheck = next((a for i, a in runtime if i == "HEALTHCHECK"), "")
    installed = set(re.findall(r"[a-z0-9][a-z0-9.+-]+", " ".join(a for i, a in runtime if i == "RUN")))
    if "curl" in healthcheck and "curl" not in installed:
        fail(f"{name}: the HEALTHCHECK uses curl, which the runtime stage does not install")
    check_oci_labels(name, runtime, target)
    shipped = [t for t in targets if copied(t)]
    if target in cli_images:
        cli = copied("baton")
        if "baton" not in targets or not cli:
            fail(f"{name}: the image does not ship the baton CLI (build target baton, and COPY --from=build "
                 f"{workdir.rstrip('/')}/build/bin/baton /usr/local/bin/baton)")
        elif not cli.startswith("/usr/local/bin/"):
            fail(f"{name}: baton is copied to {cli}, not onto the PATH (/usr/local/bin/)")
        else:
            ok(f"{name}: ships the baton CLI as {cli}")
    if shutil.which("ldd") and shutil.which("dpkg"):
        for program in shipped:
            libs = re.findall(r"=>\s+(/\S+)", run(["ldd", os.path.join(bin_dir, program)]).stdout)
            needed = sorted(p for p in packages_of(libs) - slim_base if not sanitizer_runtime.match(p))
            absent = [p for p in needed if p not in installed]
            if absent:
                fail(f"{name}: {program} links libraries from {absent}, which the runtime stage does not install")
            else:
                ok(f"{name}: the runtime stage installs the libraries {program} links ({', '.join(needed)})")
    else:
        skip(f"{name}: runtime libraries: ldd or dpkg not found")
    images[path] = {"target": target, "entrypoint": entry or [], "healthcheck": bool(healthcheck)}

def check_dockerfiles():
    for path in sorted(glob.glob(os.path.join(deploy, "docker", "*.Dockerfile"))):
        check_dockerfile(path)

def agent_config_path():
    """Where the agent image reads its configuration (its ENTRYPOINT's --config)."""
    agent = next((d for d in images.values() if d["target"] == "baton-agent"), None)
    return flag_value(agent["entrypoint"], "--config") if agent else None

# ---- 3. compose -----------------------------------------------------------------------------------------

# The documented step that makes the Compose setup's certificates (docs/deploy.md): a script beside the compose
# file that writes them into tls/ there, a directory git ignores. The files it writes are checked as it writes
# them, in a scratch directory, whether or not tls/ exists in this checkout.
tls_generator, tls_dir = "make-tls.sh", "tls"

def generated_files(base, cache={}):
    """{path under base/tls_dir that the generator writes: the copy it wrote in a scratch directory}."""
    if base not in cache:
        cache[base] = {}
        script = os.path.join(base, tls_generator)
        if os.path.isfile(script):
            scratch = os.path.join(work, f"generated{len(cache)}")
            r = run(["bash", script, scratch], timeout=60)
            if r.returncode != 0:
                fail(f"{rel(script)}: {(r.stderr or r.stdout).strip()[:500]}")
            else:
                cache[base] = {os.path.join(base, tls_dir, f): os.path.join(scratch, f) for f in os.listdir(scratch)}
                ok(f"{rel(script)} writes {', '.join(sorted(os.listdir(scratch)))}")
    return cache[base]

def openssl(*args):
    return run(["openssl", *args], timeout=20)

def certificate_names(cert):
    """The DNS names and IP addresses in a certificate's subjectAltName (what clients check, never the CN)."""
    text = openssl("x509", "-in", cert, "-noout", "-ext", "subjectAltName").stdout
    return set(re.findall(r"(?:DNS:|IP Address:)([^,\s]+)", text))

def url_host(url):
    m = re.match(r"https?://(\[[^]]+\]|[^:/]+)", url or "")
    return m.group(1).strip("[]") if m else None

def check_tls_handshake(where, cert, key, ca):
    """batond serves HTTPS with the certificate and key, and the baton CLI trusting only the CA gets an answer
    by name (localhost) and by address (127.0.0.1)."""
    data = os.path.join(work, "tls-handshake-data")
    os.makedirs(data, exist_ok=True)
    server = subprocess.Popen([os.path.join(bin_dir, "batond"), "--listen", "127.0.0.1:0", "--data-dir", data,
                               "--tls-cert", cert, "--tls-key", key, "--log-level", "error"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 10)
        line = server.stdout.readline() if ready else ""
        port = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if not port:
            server.kill()
            fail(f"{where}: batond does not start with these TLS files: {line.strip()} {server.stderr.read()[:300]}")
            return
        for host in ("localhost", "127.0.0.1"):
            r = run([os.path.join(bin_dir, "baton"), "--server", f"https://{host}:{port.group(1)}", "--ca-file", ca,
                     "get", "deploy-check/tls"], timeout=20)
            if r.returncode == 0:
                ok(f"{where}: batond serves HTTPS with them; baton trusting only the CA reaches https://{host}")
            else:
                fail(f"{where}: baton --ca-file CA get over https://{host}: {r.stderr.strip()[:300]}")
    finally:
        if server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

def check_compose_tls(name, base, batond, agents):
    """batond serves HTTPS from mounted files, which the repository holds or the documented step writes; its
    health check and every agent use https:// and trust the CA that signed them; the certificate names every
    host they use. batond: (service, argv, mounts, healthcheck); agents: [(service, config, flags, mounts)]."""
    svc, argv, mounts, healthcheck = batond
    where = f"{name}: {svc}"
    cert_path, key_path = flag_value(argv, "--tls-cert"), flag_value(argv, "--tls-key")
    if not cert_path or not key_path:
        fail(f"{where}: batond runs without --tls-cert and --tls-key: bearer tokens and leases cross the network "
             f"in clear ({' '.join(argv)})")
        return
    cert, key = mounts.get(cert_path), mounts.get(key_path)
    if not cert or not key:
        fail(f"{where}: --tls-cert {cert_path} and --tls-key {key_path} must be files mounted into the container")
        return
    ok(f"{where}: batond serves HTTPS with --tls-cert {cert_path} --tls-key {key_path}")
    if openssl("x509", "-in", cert, "-noout", "-pubkey").stdout != openssl("pkey", "-in", key, "-pubout").stdout:
        fail(f"{where}: {cert_path} and {key_path} are not a certificate and its key")
    names, users = certificate_names(cert), []   # users: (who, host, CA file on this machine)
    test = " ".join(argv_of(healthcheck.get("test")))
    health_url = next(iter(re.findall(r"\bhttps?://\S+", test)), "")
    if not health_url.startswith("https://"):
        fail(f"{where}: the health check does not use https:// ({test}); batond answers plain HTTP with 400")
    else:
        ca_path = flag_value(argv_of(healthcheck.get("test")), "--cacert")
        if not ca_path or not mounts.get(ca_path):
            fail(f"{where}: the health check does not verify batond's certificate with a mounted --cacert")
        else:
            users.append(("health check", url_host(health_url), mounts[ca_path]))
    for agent, config, flags, agent_mounts in agents:
        server = flag_value(flags, "--server") or config.get("server", "")
        ca_path = flag_value(flags, "--ca-file") or (config.get("tls") or {}).get("ca_file")
        if not server.startswith("https://"):
            fail(f"{name}: {agent}: the agent's server {server} is not https://")
        elif url_host(server) != svc:
            fail(f"{name}: {agent}: the agent's server {server} is not the batond service {svc}")
        elif not ca_path or not agent_mounts.get(ca_path):
            fail(f"{name}: {agent}: tls.ca_file {ca_path} is not a file mounted into the container")
        else:
            users.append((agent, url_host(server), agent_mounts[ca_path]))
    for who, host, ca in users:
        r = openssl("verify", "-CAfile", ca, cert)
        if r.returncode != 0:
            fail(f"{name}: {who}: batond's certificate does not verify against its CA: {(r.stdout + r.stderr).strip()}")
        elif host not in names:
            fail(f"{name}: {who}: batond's certificate names {sorted(names)}, not {host}")
        else:
            ok(f"{name}: {who}: https://{host} verifies against its CA")
    if users:
        check_tls_handshake(where, cert, key, users[0][2])

def check_tls_documented(base):
    """The generator is what the docs tell an operator to run, and what it writes stays out of git."""
    if not os.path.isfile(os.path.join(base, tls_generator)):
        return
    step = os.path.relpath(os.path.join(base, tls_generator), src)
    for doc in ("deploy/README.md", "docs/deploy.md", os.path.relpath(os.path.join(base, "compose.yaml"), src)):
        with open(os.path.join(src, doc)) as f:
            if step not in f.read():
                fail(f"{doc}: does not say to run {step} before docker compose up")
    ignore = os.path.join(src, ".gitignore")
    ignored = os.path.relpath(os.path.join(base, tls_dir), src)
    with open(ignore) as f:
        patterns = [line.strip().strip("/") for line in f]
    if ignored not in patterns:
        fail(f".gitignore: the generated {ignored}/ is not ignored (a line /{ignored}/)")
    else:
        ok(f"{step} is documented and its output {ignored}/ is ignored by git")

def check_compose_file(path):
    name, base = rel(path), os.path.dirname(path)
    compose = docs[path][0]
    services = compose.get("services") or {}

    def dockerfile_of(spec):
        b = spec.get("build")
        if b is None:
            return None, None
        b = {"context": b} if isinstance(b, str) else b
        context = os.path.normpath(os.path.join(base, b.get("context", ".")))
        return context, os.path.normpath(os.path.join(context, b.get("dockerfile", "Dockerfile")))

    batond, agents = None, []
    for svc, spec in services.items():
        where = f"{name}: {svc}"
        context, dockerfile = dockerfile_of(spec)
        if context and not os.path.isdir(context):
            fail(f"{where}: build context {rel(context)} does not exist")
        elif dockerfile and not os.path.isfile(dockerfile):
            fail(f"{where}: Dockerfile {rel(dockerfile)} does not exist")
        elif dockerfile:
            ok(f"{where}: builds {rel(dockerfile)}")
        mounts = {}
        for v in spec.get("volumes") or []:
            source, target = v.split(":")[:2] if isinstance(v, str) else (v.get("source"), v.get("target"))
            if source.startswith((".", "/")):
                host = os.path.normpath(os.path.join(base, source))
                generated = generated_files(base).get(host)
                if generated:   # checked as the documented step writes it, even if an older copy is there
                    ok(f"{where}: mounts {rel(host)}, written by {tls_generator}")
                    mounts[target] = generated
                elif os.path.exists(host):
                    ok(f"{where}: mounts {rel(host)}")
                    mounts[target] = host
                else:
                    fail(f"{where}: mounted file {source} does not exist, and {tls_generator} does not write it")
            elif source not in (compose.get("volumes") or {}):
                fail(f"{where}: named volume {source} is not declared under volumes:")
        for dep, cond in (spec.get("depends_on") or {}).items():
            if dep not in services:
                fail(f"{where}: depends on unknown service {dep}")
            elif isinstance(cond, dict) and cond.get("condition") == "service_healthy":
                image_check = images.get(dockerfile_of(services[dep])[1], {}).get("healthcheck", False)
                if not services[dep].get("healthcheck") and not image_check:
                    fail(f"{where}: waits for {dep} to be healthy, but {dep} has no healthcheck")
        for port in spec.get("ports") or []:
            if not str(port).startswith("127.0.0.1:"):
                fail(f"{where}: port {port} is published on every host address; bind it to 127.0.0.1")
        image = images.get(dockerfile, {})
        if image.get("target") == "batond":
            batond = (svc, image["entrypoint"] + argv_of(spec.get("command")), mounts, spec.get("healthcheck") or {})
            check_flags(batond[1], f"{where} entrypoint + command")
        if image.get("target") == "baton-agent":
            config = mounts.get(agent_config_path())
            if not config:
                fail(f"{where}: no configuration file mounted at {agent_config_path()}")
                continue
            check_agent_config(config, argv_of(spec.get("command")))
            with open(config) as f:
                agent_config = yaml.safe_load(f) or {}
            check_stop_timeout(f"{where} stop_grace_period",
                               agent_seconds(spec.get("stop_grace_period", "10s")), agent_config)
            agents.append((svc, agent_config, argv_of(spec.get("command")), mounts))
    if batond:
        check_compose_tls(name, base, batond, agents)
    check_tls_documented(base)

def check_compose():
    for path in [p for p in docs if is_compose(p)]:
        check_compose_file(path)

# ---- 4. Kubernetes --------------------------------------------------------------------------------------

def check_pod(where, pod, configmaps, kustomized_images):
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for c in pod.get("containers") or []:
        cwhere = f"{where} container {c['name']}"
        if c.get("image", "").rsplit(":", 1)[0] not in kustomized_images:
            fail(f"{cwhere}: image {c.get('image')} has no entry under images: in deploy/k8s/kustomization.yaml")
        env = {e["name"] for e in c.get("env") or []}
        for ref in re.findall(r"\$\((\w+)\)", " ".join(argv_of(c.get("command")) + argv_of(c.get("args")))):
            if ref not in env:
                fail(f"{cwhere}: $({ref}) is used but not defined in env")
        if "baton-agent" not in c.get("image", "") or c.get("command"):
            continue
        # The agent: its configuration is a ConfigMap key mounted where the image's ENTRYPOINT reads it, and
        # passes --check-config with the container's arguments ($(VAR) given a pod-name-like value).
        config_path, config_text = agent_config_path(), None
        for m in c.get("volumeMounts") or []:
            cm = volumes.get(m["name"], {}).get("configMap")
            if cm and config_path and os.path.dirname(config_path) == m["mountPath"].rstrip("/"):
                config_text = (configmaps.get(cm["name"], {}).get("data") or {}).get(os.path.basename(config_path))
        if config_text is None:
            fail(f"{cwhere}: no ConfigMap key mounted at {config_path}")
            continue
        copy = os.path.join(work, f"{c['name']}-{os.path.basename(config_path)}")
        with open(copy, "w") as f:
            f.write(config_text)
        args = [re.sub(r"\$\(\w+\)", "example-app-5d8f7b9c4-x2x7q", a) for a in argv_of(c.get("args"))]
        check_agent_config(copy, args, label=f"{where} ConfigMap key {os.path.basename(config_path)}")
        check_stop_timeout(f"{where} terminationGracePeriodSeconds",
                           pod.get("terminationGracePeriodSeconds", 30), yaml.safe_load(config_text))

def selects(selector, labels):
    """Whether a label selector (matchLabels and matchExpressions) selects an object with these labels."""
    selector = selector or {}
    if any(labels.get(k) != str(v) for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), [str(v) for v in e.get("values") or []]
        if not {"In": labels.get(key) in values, "NotIn": labels.get(key) not in values,
                "Exists": key in labels, "DoesNotExist": key not in labels}.get(op, False):
            return False
    return True

def pods_of(objects):
    """[(where, kind, name, replicas, pod labels, pod spec)] for every object that makes pods."""
    out = []
    for p, d in objects:
        kind, spec = d.get("kind"), d.get("spec") or {}
        if kind == "CronJob":
            spec = ((spec.get("jobTemplate") or {}).get("spec")) or {}
        if kind == "Pod":
            meta, pod = d.get("metadata") or {}, spec
        elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"):
            template = spec.get("template") or {}
            meta, pod = template.get("metadata") or {}, template.get("spec") or {}
        else:
            continue
        name = (d.get("metadata") or {}).get("name")
        out.append((f"{rel(p)}: {kind}/{name}", kind, name, spec.get("replicas", 1),
                    {k: str(v) for k, v in (meta.get("labels") or {}).items()}, pod))
    return out

def runs_image(pod, program):
    """The pod runs this Baton program as its image's entrypoint (a container with no command of its own)."""
    return any(re.search(rf"/{re.escape(program)}:", c.get("image", "") + ":") and not c.get("command")
               for c in pod.get("containers") or [])

def check_k8s_hardening(objects):
    """Every pod: no service account token (nothing here calls the Kubernetes API); batond's StatefulSet: a
    headless governing Service; the agents: a disruption budget; batond: a NetworkPolicy."""
    pods = pods_of(objects)
    services = {d["metadata"]["name"]: d for _, d in objects if d.get("kind") == "Service"}
    for where, kind, name, replicas, labels, pod in pods:
        if pod.get("automountServiceAccountToken") is False:
            ok(f"{where}: automountServiceAccountToken: false")
        else:
            fail(f"{where}: the pod mounts a service account token it never uses; "
                 "set automountServiceAccountToken: false in its pod spec")

    # The StatefulSet's serviceName: a headless Service (clusterIP: None) selecting its pods.
    for p, d in objects:
        if d.get("kind") != "StatefulSet":
            continue
        where = f"{rel(p)}: StatefulSet/{d['metadata']['name']}"
        service_name = (d.get("spec") or {}).get("serviceName")
        labels = ((((d.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels")) or {}
        service = services.get(service_name)
        if not service:
            fail(f"{where}: serviceName {service_name!r} names no Service in deploy/k8s")
        elif (service.get("spec") or {}).get("clusterIP") != "None":
            fail(f"{where}: serviceName {service_name} is not a headless Service (clusterIP: None)")
        elif not selects({"matchLabels": (service.get("spec") or {}).get("selector") or {"": ""}},
                         {k: str(v) for k, v in labels.items()}):
            fail(f"{where}: the headless Service {service_name} does not select the StatefulSet's pods")
        else:
            ok(f"{where}: serviceName {service_name} is a headless Service selecting its pods")

    # The agents: a PodDisruptionBudget selecting their pods (and no other) that lets at most one go at a
    # time and keeps a candidate for the election.
    budgets = [(p, d) for p, d in objects if d.get("kind") == "PodDisruptionBudget"]
    agents = [x for x in pods if runs_image(x[5], "baton-agent")]
    for where, kind, name, replicas, labels, pod in agents:
        mine = [(p, d) for p, d in budgets if selects((d.get("spec") or {}).get("selector"), labels)]
        if len(mine) != 1:
            fail(f"{where}: {len(mine)} PodDisruptionBudgets select the agent pods' labels {labels}; want one")
            continue
        p, budget = mine[0]
        spec, bwhere = budget.get("spec") or {}, f"{rel(p)}: PodDisruptionBudget/{budget['metadata']['name']}"
        others = [w for w, _, _, _, l, _ in pods if w != where and selects(spec.get("selector"), l)]
        max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
        if others:
            fail(f"{bwhere}: also selects the pods of {others}")
        elif max_unavailable is not None and min_available is None:
            if max_unavailable == 1:
                ok(f"{bwhere}: selects {where.split(': ')[1]}'s pods; maxUnavailable: 1")
            else:
                fail(f"{bwhere}: maxUnavailable {max_unavailable!r}: want 1 (0 blocks every drain, more lets a "
                     "drain take several agents at once)")
        elif min_available is not None and max_unavailable is None:
            if isinstance(min_available, int) and 1 <= min_available < replicas:
                ok(f"{bwhere}: selects {where.split(': ')[1]}'s pods; minAvailable {min_available} of {replicas}")
            else:
                fail(f"{bwhere}: minAvailable {min_available!r} of {replicas} replicas: want a number from 1 "
                     "(a candidate for the election) to replicas - 1 (drains can proceed)")
        else:
            fail(f"{bwhere}: set exactly one of maxUnavailable and minAvailable")
    if not agents:
        fail("deploy/k8s: no workload runs baton-agent")

    # batond: a NetworkPolicy selecting its pods that admits, on its port only, the agents and no one
    # unlabelled; egress at most DNS.
    policies = [(p, d) for p, d in objects if d.get("kind") == "NetworkPolicy"]
    for where, kind, name, replicas, labels, pod in [x for x in pods if runs_image(x[5], "batond")]:
        ports = {str(cp.get(k)) for c in pod.get("containers") or [] for cp in c.get("ports") or []
                 for k in ("containerPort", "name") if cp.get(k) is not None}
        mine = [(p, d) for p, d in policies if selects((d.get("spec") or {}).get("podSelector"), labels)]
        if not mine:
            fail(f"{where}: no NetworkPolicy selects batond's pod labels {labels}")
            continue
        for p, policy in mine:
            spec, pwhere = policy.get("spec") or {}, f"{rel(p)}: NetworkPolicy/{policy['metadata']['name']}"
            problems, admitted = [], set()
            types = spec.get("policyTypes") or []
            if "Ingress" not in types or "Egress" not in types:
                problems.append(f"policyTypes {types}: want Ingress and Egress")
            for rule in spec.get("ingress") or []:
                rule_ports = rule.get("ports") or []
                if not rule_ports or any(str(rp.get("port")) not in ports or rp.get("protocol", "TCP") != "TCP"
                                         for rp in rule_ports):
                    problems.append(f"an ingress rule on ports {rule_ports}, not only batond's port {sorted(ports)}")
                peers = rule.get("from") or []
                if not peers:
                    problems.append("an ingress rule without from: admits every source")
                for peer in peers:
                    if "ipBlock" in peer or not (peer.get("podSelector") or {}):
                        problems.append(f"an ingress peer {peer} that is not a pod selector with labels")
                    elif "namespaceSelector" not in peer:
                        admitted |= {w for w, _, _, _, l, _ in agents if selects(peer["podSelector"], l)}
            for rule in spec.get("egress") or []:
                if any(str(rp.get("port")) != "53" for rp in rule.get("ports") or [{}]):
                    problems.append(f"an egress rule {rule}: batond needs no egress but DNS")
            refused = [w for w, _, _, _, _, _ in agents if w not in admitted]
            if refused:
                problems.append(f"does not admit the agents of {refused}")
            if problems:
                fail(f"{pwhere}: {'; '.join(problems)}")
            else:
                ok(f"{pwhere}: selects batond's pods; admits the agents and labelled pods on port "
                   f"{'/'.join(sorted(ports))} only; no egress but DNS")

def check_kubernetes():
    k8s = os.path.join(deploy, "k8s")
    kustomization = os.path.join(k8s, "kustomization.yaml")
    if not os.path.isdir(k8s):
        return
    k = (docs.get(kustomization) or [{}])[0]
    listed = k.get("resources") or []
    for resource in listed:
        if not os.path.isfile(os.path.join(k8s, resource)):
            fail(f"{rel(kustomization)}: resource {resource} does not exist")
    manifests = sorted(p for p in docs if is_k8s(p) and p != kustomization)
    unlisted = [rel(p) for p in manifests if os.path.relpath(p, k8s) not in listed]
    if unlisted:
        fail(f"{rel(kustomization)}: does not list {unlisted}")
    else:
        ok(f"{rel(kustomization)}: lists every manifest ({len(manifests)})")
    objects = [(p, d) for p in manifests for d in docs[p]]
    configmaps = {d["metadata"]["name"]: d for _, d in objects if d.get("kind") == "ConfigMap"}
    for p, d in objects:
        kind, oname = d.get("kind"), (d.get("metadata") or {}).get("name")
        if not d.get("apiVersion") or not kind or not oname:
            fail(f"{rel(p)}: an object without apiVersion, kind or metadata.name")
            continue
        if kind not in ("Deployment", "StatefulSet"):
            continue
        where = f"{rel(p)}: {kind}/{oname}"
        if oname in ("batond", "fenced-store"):
            if d["spec"].get("replicas") == 1:
                ok(f"{where}: one replica")
            else:
                fail(f"{where}: must run exactly one replica (two would each keep their own tokens)")
        check_pod(where, d["spec"]["template"]["spec"], configmaps, {i.get("name") for i in k.get("images") or []})
    check_k8s_hardening(objects)
    if shutil.which("kubectl"):
        r = run(["kubectl", "kustomize", k8s])
        if r.returncode == 0:
            ok("kubectl kustomize deploy/k8s")
        else:
            fail(f"kubectl kustomize deploy/k8s: {r.stderr.strip()}")
    else:
        skip("kubectl kustomize deploy/k8s: kubectl not found")

# ---- 5. systemd -----------------------------------------------------------------------------------------

# Exposure ceilings (systemd-analyze security, 0-100 for 0.0-10.0): they keep the hardening from eroding.
exposure_ceiling = {"batond.service": 20, "baton-agent.service": 40}

def unit_values(path, key):
    with open(path) as f:
        return [line.split("=", 1)[1].strip() for line in f if line.startswith(key + "=")]

def check_unit(path):
    name = rel(path)
    exec_start = shlex.split((unit_values(path, "ExecStart") or [""])[0])
    if not exec_start:
        fail(f"{name}: no ExecStart")
        return
    if os.path.isfile(os.path.join(bin_dir, os.path.basename(exec_start[0]))):
        check_flags(exec_start, f"{name} ExecStart")
    data_dir = flag_value(exec_start, "--data-dir")
    if data_dir and data_dir not in ["/var/lib/" + d for v in unit_values(path, "StateDirectory") for d in v.split()]:
        fail(f"{name}: the data directory {data_dir} is not a StateDirectory= (created, owned, writable)")
    if os.path.basename(exec_start[0]) != "baton-agent":
        return
    if unit_values(path, "KillMode") != ["mixed"]:
        fail(f"{name}: KillMode=mixed is needed so the agent stops its jobs before systemd kills what is left")
    config, installed_as = os.path.join(os.path.dirname(path), "agent.yaml"), flag_value(exec_start, "--config")
    if not os.path.isfile(config) or not installed_as:
        fail(f"{name}: expected --config in ExecStart and a sample agent.yaml beside the unit")
        return
    flags = exec_start[1:]
    del flags[flags.index("--config"):flags.index("--config") + 2]
    check_agent_config(config, flags, label=f"{rel(config)} (installed as {installed_as})")
    with open(config) as f:
        sample = yaml.safe_load(f)
    check_stop_timeout(f"{name} TimeoutStopSec",
                       systemd_seconds((unit_values(path, "TimeoutStopSec") or ["90"])[0]), sample)
    # A wedged leader is killed (and its jobs' guards kill their groups) before its lease can expire.
    watchdog = unit_values(path, "WatchdogSec")
    ttl = agent_seconds(((sample or {}).get("election") or {}).get("ttl", "15s"))
    if watchdog and systemd_seconds(watchdog[0]) < ttl:
        ok(f"{name}: WatchdogSec {watchdog[0]} < the election's ttl ({ttl:g}s)")
    else:
        fail(f"{name}: WatchdogSec ({watchdog[0] if watchdog else 'none'}) must be below the election's ttl "
             f"({ttl:g}s), so a wedged leader is killed before its lease can expire")
    # A job the OOM killer ends is that job's failure: systemd's default (OOMPolicy=stop) would stop the agent
    # and every other job with it.
    if unit_values(path, "OOMPolicy") == ["continue"]:
        ok(f"{name}: OOMPolicy=continue (a job's OOM kill does not stop the agent)")
    else:
        fail(f"{name}: OOMPolicy must be continue, so a job killed for memory does not stop the agent")

def check_systemd():
    units = sorted(glob.glob(os.path.join(deploy, "systemd", "*.service")))
    for path in units:
        check_unit(path)
    if not shutil.which("systemd-analyze"):
        skip("systemd-analyze verify/security: systemd-analyze not found")
        return
    # The units run /usr/local/bin/...; pointed at the built binaries, verify checks everything else.
    copies = []
    for path in units:
        copies.append(os.path.join(work, os.path.basename(path)))
        with open(path) as f, open(copies[-1], "w") as out:
            out.write(f.read().replace("/usr/local/bin/", bin_dir + "/"))
    # verify exits 0 after unknown keys and bad values: any message counts as a failure.
    r = run(["systemd-analyze", "verify", *copies])
    messages = (r.stdout + r.stderr).strip()
    if r.returncode != 0 or messages:
        fail(f"systemd-analyze verify: {messages.replace(work + '/', '')}")
    else:
        ok(f"systemd-analyze verify {' '.join(rel(u) for u in units)}")
    for copy in copies:
        unit = os.path.basename(copy)
        ceiling = exposure_ceiling.get(unit)
        if ceiling is None:
            fail(f"deploy/systemd/{unit}: no exposure ceiling in tests/deploy/check-deploy.sh")
            continue
        r = run(["systemd-analyze", "security", "--offline=yes", f"--threshold={ceiling}", copy])
        level = re.search(r"exposure level for \S+: ([\d.]+)", r.stdout)
        if not level:   # systemd before 250 has no --offline
            skip(f"systemd-analyze security deploy/systemd/{unit}: {(r.stderr or r.stdout).strip()[:200]}")
        elif r.returncode == 0:
            ok(f"systemd-analyze security deploy/systemd/{unit}: exposure {level.group(1)} <= {ceiling / 10:g}")
        else:
            fail(f"systemd-analyze security deploy/systemd/{unit}: exposure {level.group(1)} above {ceiling / 10:g}")

# A file shaped unlike what a check expects is a failure with its reason, and the other checks still run.
for check in (check_yaml, check_dockerfiles, check_compose, check_kubernetes, check_systemd):
    try:
        check()
    except Exception as e:
        fail(f"{check.__name__}: {type(e).__name__}: {e}")

if failures:
    print(f"check-deploy: {len(failures)} failure(s)")
    sys.exit(1)
print("check-deploy: all checks passed")
PY
