#!/usr/bin/env python3
"""Checks docker-compose.yml and Dockerfile without a Docker engine.

1. docker-compose.yml is valid against the Compose Specification's JSON schema,
   read from $TANDEM_COMPOSE_SCHEMA or <repo>/../shared/data/compose-spec.json.
2. It says what the project relies on: broker-config mounted where
   broker-config/mosquitto.conf expects it, the coordinator built from Dockerfile
   with only environment variables the operating contract defines.
3. The Dockerfile builds and runs the product the way the rest of the project
   does: `swift build -c release --product tandem-coordinator`, the same command
   scripts/run uses, a product Package.swift declares, and that binary as the
   entry point.

Exit code 0 when everything holds; 1 with one line per problem otherwise; 2 when
the checker itself cannot run (no schema, no PyYAML or jsonschema).
"""

import json
import os
import re
import shlex
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT = "tandem-coordinator"
BUILD_COMMAND = ["swift", "build", "-c", "release", "--product", PRODUCT]

# The operating contract's environment variables (CONTRACT.md, "Operating contract").
CONTRACT_ENV = {
    "TANDEM_MQTT_HOST", "TANDEM_MQTT_PORT", "TANDEM_MQTT_USERNAME",
    "TANDEM_MQTT_PASSWORD", "TANDEM_DATABASE", "TANDEM_TOPIC_ROOT",
    "TANDEM_REORDER_WINDOW_MS", "TANDEM_MAX_SKEW_MS", "TANDEM_LOCK_LEASE_SECONDS",
    "TANDEM_PRESENCE_GRACE_SECONDS", "TANDEM_LOG_LEVEL", "TANDEM_CLIENT_ID",
    "TANDEM_MQTT_PASSWORD_FILE", "TANDEM_MQTT_CA_FILE", "TANDEM_MQTT_CERT_FILE",
    "TANDEM_MQTT_KEY_FILE", "TANDEM_METRICS_PORT", "TANDEM_METRICS_HOST",
    "TANDEM_LEADER_LEASE_SECONDS", "TANDEM_INSTANCE_ID", "TANDEM_LOG_FORMAT",
    # Tandem's own additions beside the contract's (README, "Configuration").
    "TANDEM_BROKER_ADMIN_USERNAME", "TANDEM_BROKER_ADMIN_PASSWORD_FILE",
}
# libpq's own variables, which the coordinator honours the way libpq does for a
# PostgreSQL URL without a password (docs/OPERATIONS.md).
LIBPQ_ENV = {"PGPASSFILE", "PGPASSWORD", "PGUSER"}


def fatal(message):
    print(f"validate-compose: {message}", file=sys.stderr)
    sys.exit(2)


def load_tools():
    try:
        import yaml  # noqa: F401
        import jsonschema  # noqa: F401
    except ImportError as error:
        fatal(f"{error.name} is missing: pip install pyyaml jsonschema")
    return yaml, jsonschema


def schema_path():
    """The schema's path, or None when it is not there (a clone of this repository
    alone): then only the schema check is skipped, with a notice."""
    path = os.environ.get("TANDEM_COMPOSE_SCHEMA") or os.path.join(
        REPO, "..", "shared", "data", "compose-spec.json")
    if not os.path.isfile(path):
        if os.environ.get("TANDEM_COMPOSE_SCHEMA"):
            fatal(f"no Compose schema at {os.path.normpath(path)} (TANDEM_COMPOSE_SCHEMA)")
        return None
    return path


def read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as file:
        return file.read()


def check_schema(compose, yaml, jsonschema, problems):
    path = schema_path()
    if path is None:
        print("validate-compose: notice: no Compose schema at ../shared/data/compose-spec.json "
              "(set TANDEM_COMPOSE_SCHEMA to check against one); skipping only the schema check")
        return
    with open(path, encoding="utf-8") as file:
        schema = json.load(file)
    validator = jsonschema.Draft7Validator(schema)
    for error in sorted(validator.iter_errors(compose), key=lambda e: list(e.absolute_path)):
        where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        problems.append(f"docker-compose.yml: {where}: {error.message}")


def environment_of(service):
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return env


def database_of(service):
    return str(environment_of(service).get("TANDEM_DATABASE", ""))


def check_services(compose, problems):
    services = compose.get("services") or {}
    broker = services.get("broker")
    coordinator = services.get("coordinator")
    if broker is None or coordinator is None:
        problems.append("docker-compose.yml: services 'broker' and 'coordinator' are both required")
        return

    if not str(broker.get("image", "")).startswith("eclipse-mosquitto:2"):
        problems.append("docker-compose.yml: broker must run eclipse-mosquitto:2 "
                        "(broker-config is written for mosquitto 2.0)")
    mounts = [v if isinstance(v, str) else f"{v.get('source')}:{v.get('target')}"
              for v in broker.get("volumes", [])]
    if not any(re.fullmatch(r"\./broker-config:/mosquitto/config(:ro)?", m) for m in mounts):
        problems.append("docker-compose.yml: broker must mount ./broker-config at /mosquitto/config "
                        "(the paths in broker-config/mosquitto.conf)")
    if not any(m.endswith(":/mosquitto/data") for m in mounts):
        problems.append("docker-compose.yml: broker needs a volume at /mosquitto/data "
                        "(persistence_location in broker-config/mosquitto.conf)")
    conf = read("broker-config/mosquitto.conf")
    for setting, value in (("plugin", "/usr/lib/mosquitto_dynamic_security.so"),
                           ("plugin_opt_config_file", "/mosquitto/data/dynamic-security.json"),
                           ("persistence_location", "/mosquitto/data/")):
        if not re.search(rf"^{setting} {re.escape(value)}$", conf, re.MULTILINE):
            problems.append(f"broker-config/mosquitto.conf: expected '{setting} {value}' "
                            "for the container")
    if "dynamic-security.json" not in " ".join(map(str, broker.get("command") or [])):
        problems.append("docker-compose.yml: the broker's command must seed /mosquitto/data/dynamic-security.json "
                        "from broker-config/ (the plugin writes to its file; the config folder is read-only)")

    build = coordinator.get("build")
    dockerfile = build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile"
    context = build.get("context", ".") if isinstance(build, dict) else build
    if context not in (".", "./") or dockerfile != "Dockerfile":
        problems.append("docker-compose.yml: coordinator must be built from ./Dockerfile "
                        "with the repository as context")
    # Every service running the coordinator's image: on PostgreSQL there are several.
    # The web front end is built from the same Dockerfile, target `web`.
    coordinators = {name: service for name, service in services.items()
                    if name != "web" and (service.get("image") == coordinator.get("image") or service.get("build"))}
    check_web(services.get("web"), problems)
    instance_ids = []
    for name, service in sorted(coordinators.items()):
        env = environment_of(service)
        for variable in sorted(set(env) - CONTRACT_ENV - LIBPQ_ENV):
            problems.append(f"docker-compose.yml: {name} sets {variable}, "
                            "which the operating contract does not define")
        if env.get("TANDEM_MQTT_HOST") != "broker":
            problems.append(f"docker-compose.yml: {name} needs TANDEM_MQTT_HOST=broker")
        depends = service.get("depends_on") or {}
        if "broker" not in depends:
            problems.append(f"docker-compose.yml: {name} must depend on broker")
        database = str(env.get("TANDEM_DATABASE", ""))
        if database.startswith(("postgres://", "postgresql://")):
            if "postgres" not in depends:
                problems.append(f"docker-compose.yml: {name} uses PostgreSQL but does not depend on the postgres service")
            if re.match(r"postgres(ql)?://[^/@]*:[^/@]*@", database):
                problems.append(f"docker-compose.yml: {name} has a password in TANDEM_DATABASE; use a secret (PGPASSFILE)")
        instance_ids.append(env.get("TANDEM_INSTANCE_ID"))
    if len(coordinators) > 1:
        if any(database_of(s) != database_of(coordinator) for s in coordinators.values()):
            problems.append("docker-compose.yml: the coordinators must share one database")
        if not all(database_of(s).startswith(("postgres://", "postgresql://")) for s in coordinators.values()):
            problems.append("docker-compose.yml: several coordinators need PostgreSQL (one coordinator owns a SQLite file)")
        if None in instance_ids or len(set(instance_ids)) != len(instance_ids):
            problems.append("docker-compose.yml: each coordinator needs its own TANDEM_INSTANCE_ID")
    postgres = services.get("postgres")
    if postgres is not None:
        if not str(postgres.get("image", "")).startswith("postgres:"):
            problems.append("docker-compose.yml: postgres must run the official postgres image")
        if not postgres.get("healthcheck"):
            problems.append("docker-compose.yml: postgres needs a healthcheck (the coordinators wait for it)")
        if not any(str(v).endswith(":/var/lib/postgresql/data") for v in postgres.get("volumes", [])):
            problems.append("docker-compose.yml: postgres needs a volume at /var/lib/postgresql/data")


# tandem-web's variables: the broker's (it has no account of its own) and its HTTP ones.
WEB_ENV = {"TANDEM_MQTT_HOST", "TANDEM_MQTT_PORT", "TANDEM_MQTT_CA_FILE", "TANDEM_MQTT_CERT_FILE",
           "TANDEM_MQTT_KEY_FILE", "TANDEM_TOPIC_ROOT", "TANDEM_HTTP_HOST", "TANDEM_HTTP_PORT",
           "TANDEM_LOG_LEVEL", "TANDEM_LOG_FORMAT", "TANDEM_TAB_GRACE_SECONDS", "TANDEM_FRAMES_PER_SECOND"}


def check_web(web, problems):
    """The web service, when there is one: built from ./Dockerfile's `web` target, on the
    broker, with no broker account of its own."""
    if web is None:
        return
    build = web.get("build")
    if not isinstance(build, dict) or build.get("target") != "web" or build.get("dockerfile", "Dockerfile") != "Dockerfile":
        problems.append("docker-compose.yml: web must be built from ./Dockerfile with target: web")
    env = environment_of(web)
    for variable in sorted(set(env) - WEB_ENV):
        problems.append(f"docker-compose.yml: web sets {variable}, which tandem-web does not read"
                        + (" (it has no broker account: people sign in with their own)" if "USERNAME" in variable or "PASSWORD" in variable else ""))
    if env.get("TANDEM_MQTT_HOST") != "broker":
        problems.append("docker-compose.yml: web needs TANDEM_MQTT_HOST=broker")
    if "broker" not in (web.get("depends_on") or {}):
        problems.append("docker-compose.yml: web must depend on broker")
    if env.get("TANDEM_HTTP_HOST") not in ("0.0.0.0", "::"):
        problems.append("docker-compose.yml: web must listen on all addresses in its container (TANDEM_HTTP_HOST=0.0.0.0)")


def dockerfile_instructions(text):
    """(INSTRUCTION, arguments) pairs, with continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            yield keyword.upper(), rest.strip()


def runs_build_command(shell_text):
    """Whether some `&&`/`;`-separated command in shell_text is BUILD_COMMAND
    (extra flags such as --static-swift-stdlib allowed)."""
    for command in re.split(r"&&|;|\|\|", shell_text):
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        if words[:2] != ["swift", "build"]:
            continue
        flags = words[2:]
        if "-c" in flags and flags[flags.index("-c") + 1:][:1] == ["release"] \
                and "--product" in flags and flags[flags.index("--product") + 1:][:1] == [PRODUCT]:
            return True
    return False


def check_dockerfile(problems):
    instructions = list(dockerfile_instructions(read("Dockerfile")))
    if not any(k == "RUN" and runs_build_command(args) for k, args in instructions):
        problems.append(f"Dockerfile: no RUN of `{' '.join(BUILD_COMMAND)}` "
                        "(the build scripts/run and CI use)")
    # compose runs the coordinators on PostgreSQL: the image needs the package's
    # PostgreSQL trait (a default one), which scripts/run leaves out for SQLite.
    if any(k == "RUN" and runs_build_command(args) and "--disable-default-traits" in args
           for k, args in instructions):
        problems.append("Dockerfile: the build must keep the PostgreSQL trait "
                        "(no --disable-default-traits): compose runs the coordinators on PostgreSQL")
    entry = [args for k, args in instructions if k == "ENTRYPOINT"]
    if not entry or json.loads(entry[-1])[0] not in (PRODUCT, f"/usr/local/bin/{PRODUCT}"):
        problems.append(f"Dockerfile: ENTRYPOINT must be [\"{PRODUCT}\"]")
    if not any(k == "USER" and args not in ("root", "0") for k, args in instructions):
        problems.append("Dockerfile: the runtime stage must switch to a non-root USER")

    if not re.search(rf'\.executable\(\s*name:\s*"{PRODUCT}"', read("Package.swift")):
        problems.append(f"Package.swift declares no executable product '{PRODUCT}'")
    run_script = os.path.join(REPO, "scripts", "run")
    if not os.path.isfile(run_script) or not runs_build_command(read("scripts/run").replace("\n", ";")):
        problems.append(f"scripts/run does not build with `{' '.join(BUILD_COMMAND)}` "
                        "like the Dockerfile")


def main():
    yaml, jsonschema = load_tools()
    try:
        compose = yaml.safe_load(read("docker-compose.yml"))
    except yaml.YAMLError as error:
        print(f"validate-compose: docker-compose.yml is not valid YAML: {error}", file=sys.stderr)
        return 1
    problems = []
    check_schema(compose, yaml, jsonschema, problems)
    check_services(compose, problems)
    check_dockerfile(problems)
    if problems:
        for problem in problems:
            print(f"validate-compose: {problem}", file=sys.stderr)
        return 1
    path = schema_path()
    print("validate-compose: docker-compose.yml and Dockerfile are consistent "
          + (f"(schema {os.path.normpath(path)})" if path else "(no schema check)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
