"""Kubernetes protobuf request bodies decoded into the dicts their JSON form gives.

Three sources of truth: bodies kubectl 1.32 really sent (committed fixtures, checked byte for byte both ways
against kubectl's own JSON for the same command), a live capture when kubectl is installed, and round trips
through the module's Go-compatible encoder for every covered kind.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import shlex
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.cluster.protobuf import (
    KINDS,
    MAGIC,
    MESSAGES,
    PROTOBUF_CONTENT_TYPE,
    ProtobufError,
    UnsupportedKindError,
    decode_k8s_protobuf,
    encode_k8s_protobuf,
    supported_kinds,
)

KUBECTL = Path("/usr/lib/google-cloud-sdk/bin/kubectl.1.32")
FIXTURES = Path(__file__).parent / "fixtures" / "protobuf"

# Fixture name → kubectl command. Each fixture is the body kubectl sent (<name>.pb) and the JSON it prints for
# the same command with --dry-run=client -o json (<name>.json).
KUBECTL_CREATES: dict[str, str] = {
    "namespace": "create namespace foo",
    "configmap": "create configmap cfg --from-literal=a=b '--from-literal=greeting=héllo wörld'",
    "secret": "create secret generic creds --from-literal=user=admin --from-literal=pass=s3cr3t",
    "serviceaccount": "create serviceaccount robot",
    "deployment": "create deployment web --image=nginx --replicas=2 --port=80",
    "service": "create service clusterip web --tcp=80:8080 --tcp=443:https",
    "service-nodeport": "create service nodeport np --tcp=80:8080 --node-port=30080",
    "job": "create job pi --image=perl:5.34 -- perl -Mbignum=bpi -wle 'print bpi(20)'",
    "cronjob": "create cronjob tick --image=busybox '--schedule=*/5 * * * *' -- date",
    "priorityclass": "create priorityclass high --value=1000 '--description=for the important ones' "
    "--preemption-policy=Never",
    "quota": "create quota q --hard=cpu=1,memory=1Gi,pods=10 --scopes=NotBestEffort",
    "pdb-min": "create poddisruptionbudget pdb --selector=app=web --min-available=1",
    "pdb-max-percent": "create pdb pdb2 --selector=app=web --max-unavailable=50%",
}


# ------------------------------------------------------------------------------------------------------
# Hand-built wire bytes


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    return MAGIC + _field(1, _field(1, api_version.encode()) + _field(2, kind.encode())) + _field(2, raw)


# ------------------------------------------------------------------------------------------------------
# A throwaway API server that records bodies and echoes the decoded object back


class _Capture(BaseHTTPRequestHandler):
    bodies: list[tuple[str, str, bytes]]  # set per server: (path, content type, body)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self, code: int, obj: dict[str, Any]) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/api":
            self._answer(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        elif path == "/apis":
            self._answer(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        elif path == "/api/v1":
            self._answer(
                200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "v1", "resources": []}
            )
        else:
            self._answer(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.bodies.append((self.path, self.headers.get("Content-Type", ""), body))
        try:
            obj = decode_k8s_protobuf(body)
        except ProtobufError as e:
            self._answer(415, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": str(e)})
        else:
            self._answer(201, obj)


class CaptureServer:
    """Serves on 127.0.0.1 (a random port) while in its ``with`` block."""

    def __init__(self) -> None:
        handler = type("Handler", (_Capture,), {"bodies": []})
        self.bodies: list[tuple[str, str, bytes]] = handler.bodies
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CaptureServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


def kubectl(
    args: list[str], workdir: Path, server: str = "http://127.0.0.1:1", flags: tuple[str, ...] = ()
) -> str:
    """Run kubectl against ``server``; ``flags`` go before any ``--`` (which starts a container's command)."""
    env = {**os.environ, "KUBECONFIG": str(workdir / "no-kubeconfig")}
    split = args.index("--") if "--" in args else len(args)
    flags = (f"--server={server}", f"--cache-dir={workdir / 'cache'}", "--validate=false", *flags)
    cmd = [str(KUBECTL), *args[:split], *flags, *args[split:]]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=30, check=False)
    assert done.returncode == 0, f"{args}: {done.stderr}"
    return done.stdout


def capture(command: str, workdir: Path, server: CaptureServer) -> tuple[bytes, dict[str, Any]]:
    """The body kubectl sends for ``command``, and the JSON it prints for it with --dry-run=client."""
    args = shlex.split(command)
    before = len(server.bodies)
    kubectl(args, workdir, server.url)
    assert len(server.bodies) == before + 1, server.bodies[before:]
    _, content_type, body = server.bodies[-1]
    assert content_type == PROTOBUF_CONTENT_TYPE
    return body, json.loads(kubectl(args, workdir, flags=("--dry-run=client", "-o", "json")))


def write_fixtures(workdir: Path) -> None:
    """Refresh the committed fixtures (run by hand: kubectl 1.32 must be installed)."""
    FIXTURES.mkdir(parents=True, exist_ok=True)
    with CaptureServer() as server:
        for name, command in KUBECTL_CREATES.items():
            body, as_json = capture(command, workdir, server)
            (FIXTURES / f"{name}.pb").write_bytes(body)
            (FIXTURES / f"{name}.json").write_text(json.dumps(as_json, indent=2, ensure_ascii=False) + "\n")


# ------------------------------------------------------------------------------------------------------
# Real kubectl bodies


@pytest.mark.parametrize("name", sorted(KUBECTL_CREATES))
def test_kubectl_body_decodes_to_kubectls_json(name: str) -> None:
    body = (FIXTURES / f"{name}.pb").read_bytes()
    expected = json.loads((FIXTURES / f"{name}.json").read_text())
    assert decode_k8s_protobuf(body) == expected


@pytest.mark.parametrize("name", sorted(KUBECTL_CREATES))
def test_encoder_writes_kubectls_bytes(name: str) -> None:
    obj = json.loads((FIXTURES / f"{name}.json").read_text())
    assert encode_k8s_protobuf(obj) == (FIXTURES / f"{name}.pb").read_bytes()


# What each command asked for, as (dotted path, value); list items by index.
ASKED_FOR: dict[str, list[tuple[str, Any]]] = {
    "namespace": [("metadata.name", "foo")],
    "configmap": [("metadata.name", "cfg"), ("data", {"a": "b", "greeting": "héllo wörld"})],
    "secret": [("type", None), ("data.user", "YWRtaW4="), ("data.pass", "czNjcjN0")],
    "serviceaccount": [("metadata.name", "robot")],
    "deployment": [
        ("spec.replicas", 2),
        ("spec.selector.matchLabels", {"app": "web"}),
        ("spec.template.spec.containers.0.image", "nginx"),
        ("spec.template.spec.containers.0.ports", [{"containerPort": 80}]),
    ],
    "service": [
        ("spec.type", "ClusterIP"),
        ("spec.ports.0.port", 80),
        ("spec.ports.0.targetPort", 8080),
        ("spec.ports.1.targetPort", "https"),
    ],
    "service-nodeport": [("spec.type", "NodePort"), ("spec.ports.0.nodePort", 30080)],
    "job": [("spec.template.spec.containers.0.command", ["perl", "-Mbignum=bpi", "-wle", "print bpi(20)"])],
    "cronjob": [("spec.schedule", "*/5 * * * *"), ("spec.jobTemplate.metadata.name", "tick")],
    "priorityclass": [
        ("value", 1000),
        ("description", "for the important ones"),
        ("preemptionPolicy", "Never"),
    ],
    "quota": [("spec.hard", {"cpu": "1", "memory": "1Gi", "pods": "10"}), ("spec.scopes", ["NotBestEffort"])],
    "pdb-min": [("spec.minAvailable", 1), ("status.disruptionsAllowed", 0)],
    "pdb-max-percent": [("spec.maxUnavailable", "50%")],
}


def _at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj.get(part)
    return obj


def _assert_asked_for(name: str, obj: dict[str, Any]) -> None:
    for path, value in ASKED_FOR[name]:
        assert _at(obj, path) == value, (name, path)


@pytest.mark.parametrize("name", sorted(KUBECTL_CREATES))
def test_kubectl_bodies_hold_what_the_commands_asked_for(name: str) -> None:
    _assert_asked_for(name, decode_k8s_protobuf((FIXTURES / f"{name}.pb").read_bytes()))


LIVE = ("namespace", "configmap", "secret", "deployment", "service", "serviceaccount", "priorityclass")


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.32 is not installed")
def test_live_kubectl_creates(tmp_path: Path) -> None:
    """kubectl's create generators send protobuf; each body decodes to the JSON kubectl prints for it."""
    with CaptureServer() as server:
        for name in LIVE:
            body, as_json = capture(KUBECTL_CREATES[name], tmp_path, server)
            assert body.startswith(MAGIC)
            decoded = decode_k8s_protobuf(body)
            assert decoded == as_json, name
            _assert_asked_for(name, decoded)


# ------------------------------------------------------------------------------------------------------
# Round trips of realistic objects, one or more per covered kind

META = {"name": "x", "namespace": "ns", "creationTimestamp": None}
TS = "2026-12-02T10:20:30Z"

POD_SPEC: dict[str, Any] = {
    "volumes": [
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        {
            "name": "cfg",
            "configMap": {
                "name": "cfg",
                "items": [{"key": "a", "path": "a.txt", "mode": 0}],
                "defaultMode": 420,
            },
        },
        {"name": "sec", "secret": {"secretName": "creds", "optional": False}},
        {"name": "host", "hostPath": {"path": "/var/log", "type": "Directory"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
        {
            "name": "proj",
            "projected": {
                "sources": [
                    {"serviceAccountToken": {"audience": "api", "expirationSeconds": 3600, "path": "token"}},
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "path": "labels",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"},
                                }
                            ]
                        }
                    },
                    {"configMap": {"name": "ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                ],
                "defaultMode": 420,
            },
        },
        {
            "name": "podinfo",
            "downwardAPI": {
                "items": [
                    {
                        "path": "cpu",
                        "resourceFieldRef": {
                            "containerName": "app",
                            "resource": "limits.cpu",
                            "divisor": "1m",
                        },
                    }
                ]
            },
        },
    ],
    "initContainers": [
        {"name": "init", "image": "busybox", "command": ["sh", "-c", "true"], "resources": {}}
    ],
    "containers": [
        {
            "name": "app",
            "image": "registry.example/app:1.2",
            "args": ["--port=8080"],
            "workingDir": "/srv",
            "ports": [
                {"name": "http", "containerPort": 8080, "protocol": "TCP"},
                {"containerPort": 9090, "hostPort": 9090},
            ],
            "envFrom": [
                {"configMapRef": {"name": "cfg"}},
                {"prefix": "S_", "secretRef": {"name": "creds", "optional": True}},
            ],
            "env": [
                {"name": "PLAIN", "value": "v"},
                {"name": "EMPTY"},
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pass"}}},
                {
                    "name": "CM",
                    "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "a", "optional": False}},
                },
                {
                    "name": "MEM",
                    "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "0"}},
                },
            ],
            "resources": {
                "limits": {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"},
                "requests": {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu": "1"},
            },
            "volumeMounts": [{"name": "cfg", "readOnly": True, "mountPath": "/etc/cfg", "subPath": "a.txt"}],
            "livenessProbe": {
                "httpGet": {
                    "path": "/healthz",
                    "port": 8080,
                    "scheme": "HTTP",
                    "httpHeaders": [{"name": "X", "value": "1"}],
                },
                "initialDelaySeconds": 3,
                "timeoutSeconds": 1,
                "periodSeconds": 10,
                "successThreshold": 1,
                "failureThreshold": 3,
            },
            "readinessProbe": {"tcpSocket": {"port": "http"}, "timeoutSeconds": 1},
            "startupProbe": {
                "exec": {"command": ["cat", "/tmp/ok"]},
                "timeoutSeconds": 1,
                "terminationGracePeriodSeconds": 0,
            },
            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}, "postStart": {"exec": {"command": ["true"]}}},
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent",
            "securityContext": {
                "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                "privileged": False,
                "runAsUser": 0,
                "runAsNonRoot": False,
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        },
        {
            "name": "sidecar",
            "image": "envoy",
            "resources": {},
            "restartPolicy": "Always",
            "stdin": True,
            "tty": True,
        },
    ],
    "restartPolicy": "Always",
    "terminationGracePeriodSeconds": 0,
    "activeDeadlineSeconds": 600,
    "dnsPolicy": "ClusterFirst",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "serviceAccountName": "robot",
    "automountServiceAccountToken": False,
    "nodeName": "n1",
    "hostNetwork": True,
    "securityContext": {
        "runAsUser": 1000,
        "runAsGroup": 0,
        "fsGroup": 2000,
        "supplementalGroups": [1, 2],
        "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
    },
    "imagePullSecrets": [{"name": "pull"}],
    "hostname": "h",
    "subdomain": "s",
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
                ]
            },
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}}
            ],
        },
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "topologyKey": "kubernetes.io/hostname",
                    "namespaces": ["db"],
                }
            ]
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {
                            "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]
                        },
                        "namespaceSelector": {},
                        "topologyKey": "topology.kubernetes.io/zone",
                        "matchLabelKeys": ["pod-template-hash"],
                    },
                }
            ]
        },
    },
    "schedulerName": "kubesched",
    "tolerations": [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
        {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ],
    "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db.local"]}],
    "priorityClassName": "high",
    "priority": 0,
    "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
    "readinessGates": [{"conditionType": "example.com/ready"}],
    "runtimeClassName": "gvisor",
    "enableServiceLinks": False,
    "preemptionPolicy": "PreemptLowerPriority",
    "overhead": {"cpu": "100m"},
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}},
            "minDomains": 2,
            "nodeAffinityPolicy": "Honor",
        }
    ],
    "schedulingGates": [{"name": "example.com/gate"}],
}

POD_STATUS = {
    "phase": "Running",
    "conditions": [
        {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": TS},
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": TS},
    ],
    "hostIP": "10.0.0.2",
    "hostIPs": [{"ip": "10.0.0.2"}],
    "podIP": "10.244.0.5",
    "podIPs": [{"ip": "10.244.0.5"}],
    "startTime": TS,
    "containerStatuses": [
        {
            "name": "app",
            "state": {"running": {"startedAt": TS}},
            "lastState": {
                "terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": None, "finishedAt": TS}
            },
            "ready": True,
            "restartCount": 1,
            "image": "registry.example/app:1.2",
            "imageID": "sha256:abc",
            "containerID": "containerd://1",
            "started": True,
        }
    ],
    "qosClass": "Burstable",
    "nominatedNodeName": "n2",
}

TEMPLATE = {
    "metadata": {"creationTimestamp": None, "labels": {"app": "web"}},
    "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {}}]},
}
SELECTOR = {"matchLabels": {"app": "web"}}

ROUND_TRIPS: dict[str, dict[str, Any]] = {
    "pod": {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-0",
            "generateName": "web-",
            "namespace": "default",
            "uid": "0b7c6f5e-3a3b-4c1e-9f0a-1d2e3f4a5b6c",
            "resourceVersion": "42",
            "generation": 3,
            "creationTimestamp": TS,
            "deletionTimestamp": "2026-12-02T10:21:00Z",
            "deletionGracePeriodSeconds": 0,
            "labels": {"app": "web", "pod-template-hash": "abc"},
            "annotations": {"note": "ünïcødé ✓", "empty": ""},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": "web-abc",
                    "uid": "u1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["example.com/keep"],
            "managedFields": [
                {
                    "manager": "kubectl",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": TS,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}},
                }
            ],
        },
        "spec": POD_SPEC,
        "status": POD_STATUS,
    },
    "namespace": {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "team",
            "creationTimestamp": None,
            "labels": {"kubernetes.io/metadata.name": "team"},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {
            "phase": "Terminating",
            "conditions": [
                {"type": "NamespaceDeletionDiscoveryFailure", "status": "False", "lastTransitionTime": TS}
            ],
        },
    },
    "configmap": {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": META,
        "data": {"app.properties": "a=1\nb=2\n", "empty": ""},
        "binaryData": {"blob": base64.b64encode(b"\x00\xff\xfe binary").decode()},
        "immutable": False,
    },
    "secret": {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": META,
        "type": "kubernetes.io/tls",
        "data": {
            "tls.crt": base64.b64encode(b"cert").decode(),
            "tls.key": base64.b64encode(b"\x01\x02").decode(),
            "empty": "",
        },
        "immutable": True,
    },
    "serviceaccount": {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": META,
        "secrets": [{"name": "tok", "namespace": "ns"}],
        "imagePullSecrets": [{"name": "pull"}],
        "automountServiceAccountToken": False,
    },
    "service": {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": META,
        "spec": {
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080, "nodePort": 30080},
                {
                    "name": "https",
                    "protocol": "TCP",
                    "appProtocol": "https",
                    "port": 443,
                    "targetPort": "https",
                },
            ],
            "selector": {"app": "web"},
            "clusterIP": "10.96.0.10",
            "clusterIPs": ["10.96.0.10"],
            "type": "LoadBalancer",
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10800}},
            "externalTrafficPolicy": "Local",
            "healthCheckNodePort": 31000,
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "allocateLoadBalancerNodePorts": False,
            "internalTrafficPolicy": "Cluster",
        },
        "status": {
            "loadBalancer": {"ingress": [{"ip": "192.0.2.1", "ports": [{"port": 80, "protocol": "TCP"}]}]}
        },
    },
    "podtemplate": {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": META,
        "template": {"metadata": {"creationTimestamp": None}, "spec": POD_SPEC},
    },
    "node": {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "creationTimestamp": TS, "labels": {"kubernetes.io/hostname": "n1"}},
        "spec": {
            "podCIDR": "10.244.1.0/24",
            "podCIDRs": ["10.244.1.0/24"],
            "providerID": "kind://n1",
            "unschedulable": True,
            "taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": TS},
                {"key": "dedicated", "value": "gpu", "effect": "NoExecute"},
            ],
        },
        "status": {
            "capacity": {"cpu": "4", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"},
            "allocatable": {"cpu": "3800m", "memory": "31Gi", "pods": "110"},
            "phase": "Running",
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "lastHeartbeatTime": TS,
                    "lastTransitionTime": TS,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.2"},
                {"type": "Hostname", "address": "n1"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": "m",
                "systemUUID": "s",
                "bootID": "b",
                "kernelVersion": "6.1",
                "osImage": "Debian",
                "containerRuntimeVersion": "containerd://1.7",
                "kubeletVersion": "v1.32.0",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": [{"names": ["nginx:latest"], "sizeBytes": 70000000}],
        },
    },
    "binding": {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "web-0", "namespace": "default", "uid": "u", "creationTimestamp": None},
        "target": {"kind": "Node", "name": "n1"},
    },
    "core-event": {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "web-0.1", "namespace": "default", "creationTimestamp": None},
        "involvedObject": {
            "kind": "Pod",
            "namespace": "default",
            "name": "web-0",
            "uid": "u",
            "apiVersion": "v1",
            "resourceVersion": "42",
        },
        "reason": "Scheduled",
        "message": "Successfully assigned default/web-0 to n1",
        "source": {"component": "default-scheduler"},
        "firstTimestamp": TS,
        "lastTimestamp": TS,
        "count": 1,
        "type": "Normal",
        "eventTime": "2026-12-02T10:20:30.123456Z",
        "series": {"count": 2, "lastObservedTime": "2026-12-02T10:20:31.000001Z"},
        "action": "Binding",
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-n0",
    },
    "events-event": {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web-0.2", "namespace": "default", "creationTimestamp": None},
        "eventTime": "2026-12-02T10:20:30.500000Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-n0",
        "action": "Scheduling",
        "reason": "FailedScheduling",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web-0"},
        "note": "0/2 nodes are available: 1 Insufficient cpu.",
        "type": "Warning",
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    },
    "resourcequota": {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": META,
        "spec": {
            "hard": {"requests.cpu": "4", "limits.memory": "8Gi", "count/pods": "20"},
            "scopeSelector": {
                "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
            },
        },
        "status": {"hard": {"requests.cpu": "4"}, "used": {"requests.cpu": "1500m"}},
    },
    "limitrange": {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": META,
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "max": {"cpu": "2"},
                    "default": {"cpu": "500m"},
                    "defaultRequest": {"cpu": "100m"},
                }
            ]
        },
    },
    "pvc": {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": META,
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "10Gi"}},
            "storageClassName": "standard",
            "volumeMode": "Filesystem",
        },
        "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}},
    },
    "pv": {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv1", "creationTimestamp": None},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "local": {"path": "/mnt/disks/1"},
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "ns", "name": "x"},
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "local",
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}
                            ]
                        }
                    ]
                }
            },
        },
        "status": {"phase": "Available"},
    },
    "endpoints": {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": META,
        "subsets": [
            {
                "addresses": [
                    {"ip": "10.244.0.5", "nodeName": "n1", "targetRef": {"kind": "Pod", "name": "web-0"}}
                ],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            }
        ],
    },
    "replicationcontroller": {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": META,
        "spec": {"replicas": 0, "selector": {"app": "web"}, "template": TEMPLATE},
        "status": {"replicas": 0},
    },
    "deployment": {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {**META, "generation": 2, "annotations": {"deployment.kubernetes.io/revision": "1"}},
        "spec": {
            "replicas": 0,
            "selector": SELECTOR,
            "template": TEMPLATE,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
            "minReadySeconds": 5,
            "revisionHistoryLimit": 10,
            "paused": True,
            "progressDeadlineSeconds": 600,
        },
        "status": {
            "observedGeneration": 2,
            "replicas": 3,
            "updatedReplicas": 3,
            "readyReplicas": 2,
            "availableReplicas": 2,
            "unavailableReplicas": 1,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "lastUpdateTime": TS,
                    "lastTransitionTime": TS,
                    "reason": "MinimumReplicasAvailable",
                    "message": "ok",
                }
            ],
        },
    },
    "replicaset": {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": META,
        "spec": {"replicas": 3, "selector": SELECTOR, "template": TEMPLATE},
        "status": {
            "replicas": 3,
            "fullyLabeledReplicas": 3,
            "readyReplicas": 3,
            "availableReplicas": 3,
            "observedGeneration": 1,
        },
    },
    "statefulset": {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": META,
        "spec": {
            "replicas": 3,
            "selector": SELECTOR,
            "template": TEMPLATE,
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data", "creationTimestamp": None},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                    "status": {},
                }
            ],
            "serviceName": "web",
            "podManagementPolicy": "Parallel",
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"partition": 0, "maxUnavailable": 1},
            },
            "revisionHistoryLimit": 10,
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Delete"},
            "ordinals": {"start": 0},
        },
        "status": {
            "replicas": 3,
            "currentRevision": "web-1",
            "updateRevision": "web-1",
            "collisionCount": 0,
            "availableReplicas": 3,
        },
    },
    "daemonset": {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": META,
        "spec": {
            "selector": SELECTOR,
            "template": TEMPLATE,
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "revisionHistoryLimit": 10,
        },
        "status": {
            "currentNumberScheduled": 2,
            "numberMisscheduled": 0,
            "desiredNumberScheduled": 2,
            "numberReady": 0,
        },
    },
    "controllerrevision": {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": META,
        "data": {"spec": {"template": {"$patch": "replace"}}},
        "revision": 1,
    },
    "job": {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": META,
        "spec": {
            "parallelism": 2,
            "completions": 4,
            "activeDeadlineSeconds": 600,
            "backoffLimit": 0,
            "selector": SELECTOR,
            "manualSelector": True,
            "template": {**TEMPLATE, "spec": {**TEMPLATE["spec"], "restartPolicy": "Never"}},
            "ttlSecondsAfterFinished": 100,
            "completionMode": "Indexed",
            "suspend": False,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {"containerName": "c", "operator": "In", "values": [1, 42, -1]},
                    },
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                ]
            },
            "podReplacementPolicy": "Failed",
        },
        "status": {
            "startTime": TS,
            "active": 1,
            "succeeded": 2,
            "ready": 1,
            "uncountedTerminatedPods": {"succeeded": ["u1"]},
        },
    },
    "cronjob": {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": META,
        "spec": {
            "schedule": "*/5 * * * *",
            "timeZone": "Etc/UTC",
            "startingDeadlineSeconds": 30,
            "concurrencyPolicy": "Forbid",
            "suspend": True,
            "jobTemplate": {"metadata": {"creationTimestamp": None}, "spec": {"template": TEMPLATE}},
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 1,
        },
        "status": {"active": [{"kind": "Job", "name": "tick-1"}], "lastScheduleTime": TS},
    },
    "pdb": {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": META,
        "spec": {"minAvailable": "50%", "selector": SELECTOR, "unhealthyPodEvictionPolicy": "AlwaysAllow"},
        "status": {
            "observedGeneration": 1,
            "disruptedPods": {"web-0": TS},
            "disruptionsAllowed": 0,
            "currentHealthy": 2,
            "desiredHealthy": 2,
            "expectedPods": 3,
        },
    },
    "eviction": {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "web-0", "namespace": "default", "creationTimestamp": None},
        "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "u"}},
    },
    "priorityclass": {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "low", "creationTimestamp": None},
        "value": -5,
        "globalDefault": True,
        "description": "negative priorities are legal",
        "preemptionPolicy": "Never",
    },
    "lease": {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kube-scheduler", "namespace": "kube-system", "creationTimestamp": None},
        "spec": {
            "holderIdentity": "n0_1234",
            "leaseDurationSeconds": 15,
            "acquireTime": "2026-12-02T10:20:30.000000Z",
            "renewTime": "2026-12-02T10:20:40.654321Z",
            "leaseTransitions": 0,
        },
    },
    "scale": {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            "name": "web",
            "namespace": "default",
            "resourceVersion": "7",
            "creationTimestamp": None,
        },
        "spec": {"replicas": 5},
        "status": {"replicas": 3, "selector": "app=web"},
    },
    "scale-to-zero": {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "web", "creationTimestamp": None},
        "spec": {},
        "status": {"replicas": 0},
    },
    "deleteoptions": {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"resourceVersion": "42"},
        "orphanDependents": False,
        "propagationPolicy": "Foreground",
        "dryRun": ["All"],
    },
    "storageclass": {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local", "creationTimestamp": None},
        "provisioner": "kubernetes.io/no-provisioner",
        "parameters": {"type": "ssd"},
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowVolumeExpansion": True,
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a"]}]}],
    },
    "csidriver": {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": "csi.example", "creationTimestamp": None},
        "spec": {
            "attachRequired": False,
            "podInfoOnMount": True,
            "volumeLifecycleModes": ["Persistent", "Ephemeral"],
            "storageCapacity": True,
            "fsGroupPolicy": "File",
            "tokenRequests": [{"audience": "", "expirationSeconds": 600}],
            "requiresRepublish": False,
        },
    },
    "csistoragecapacity": {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIStorageCapacity",
        "metadata": META,
        "nodeTopology": {"matchLabels": {"zone": "a"}},
        "storageClassName": "local",
        "capacity": "100Gi",
        "maximumVolumeSize": "0",
    },
    "volumeattachment": {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": "va", "creationTimestamp": None},
        "spec": {"attacher": "csi.example", "source": {"persistentVolumeName": "pv1"}, "nodeName": "n1"},
        "status": {
            "attached": False,
            "attachError": {"time": TS, "message": "timeout", "errorCode": 0},
            "detachError": {"time": None},
        },
    },
    "csinode": {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n1", "creationTimestamp": None},
        "spec": {
            "drivers": [
                {
                    "name": "csi.example",
                    "nodeID": "n1",
                    "topologyKeys": ["zone"],
                    "allocatable": {"count": 16},
                }
            ]
        },
        "status": {},
    },
}

# RBAC objects and the authentication/authorization requests kubectl's typed clients send (create role,
# auth can-i, auth whoami, create token).
_META = {"name": "x", "creationTimestamp": None}
_SAR_SPEC = {
    "resourceAttributes": {"namespace": "ns", "verb": "list", "group": "apps", "resource": "deployments"}
}
ROUND_TRIPS.update(
    {
        "role": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {**_META, "namespace": "ns"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"]}],
        },
        "clusterrole": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _META,
            "rules": [{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]},
        },
        "rolebinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {**_META, "namespace": "ns"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
        },
        "clusterrolebinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _META,
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "u"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        },
        "tokenrequest": {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "metadata": _META,
            "spec": {
                "audiences": ["api"],
                "expirationSeconds": 600,
                "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "u"},
            },
            "status": {"token": "", "expirationTimestamp": None},
        },
        "tokenreview": {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "metadata": _META,
            "spec": {"token": "t", "audiences": ["api"]},
            "status": {"user": {}},
        },
        "selfsubjectreview": {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "SelfSubjectReview",
            "metadata": _META,
            "status": {"userInfo": {"username": "u", "groups": ["g"]}},
        },
        "subjectaccessreview": {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "metadata": _META,
            "spec": {**_SAR_SPEC, "user": "u", "groups": ["g"]},
            "status": {"allowed": False},
        },
        "localsubjectaccessreview": {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "LocalSubjectAccessReview",
            "metadata": {**_META, "namespace": "ns"},
            "spec": {**_SAR_SPEC, "user": "u"},
            "status": {"allowed": True, "reason": "r"},
        },
        "selfsubjectaccessreview": {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": _META,
            "spec": {"nonResourceAttributes": {"path": "/healthz", "verb": "get"}},
            "status": {"allowed": False},
        },
        "selfsubjectrulesreview": {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectRulesReview",
            "metadata": _META,
            "spec": {"namespace": "ns"},
            "status": {"incomplete": False},
        },
    }
)


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_round_trip(name: str) -> None:
    obj = ROUND_TRIPS[name]
    body = encode_k8s_protobuf(obj)
    assert body.startswith(MAGIC)
    assert decode_k8s_protobuf(body) == obj


def test_round_trips_cover_every_kind() -> None:
    covered = {(o["apiVersion"], o["kind"]) for o in ROUND_TRIPS.values()} | {
        (o["apiVersion"], o["kind"]) for o in (json.loads(p.read_text()) for p in FIXTURES.glob("*.json"))
    }
    missing = supported_kinds() - covered
    assert not missing


# ------------------------------------------------------------------------------------------------------
# JSON mapping rules


def _decode_one(kind_obj: dict[str, Any]) -> dict[str, Any]:
    return decode_k8s_protobuf(encode_k8s_protobuf(kind_obj))


def test_zero_values_follow_go_json() -> None:
    # Non-pointer scalars Go writes always: dropped when zero with omitempty, kept without it.
    # Pointers: kept whatever their value, absent when unset. Structs: always present.
    pod = _decode_one(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "", "image": "", "ports": [{"containerPort": 0}]}],
                "hostNetwork": False,
                "terminationGracePeriodSeconds": 0,
                "automountServiceAccountToken": False,
            },
        }
    )
    assert pod == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "creationTimestamp": None},
        "spec": {
            "containers": [{"name": "", "ports": [{"containerPort": 0}], "resources": {}}],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
        },
        "status": {},
    }


def test_quantity_intorstring_and_times() -> None:
    svc = _decode_one(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 1, "targetPort": "http"}, {"port": 2, "targetPort": 0}, {"port": 3}]},
        }
    )
    assert [p["targetPort"] for p in svc["spec"]["ports"]] == ["http", 0, 0]
    lease = _decode_one(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "l", "creationTimestamp": "2026-12-02T11:20:30+01:00"},
            "spec": {"renewTime": "1969-12-31T23:59:59.5Z", "leaseTransitions": 0},
        }
    )
    assert lease["metadata"]["creationTimestamp"] == "2026-12-02T10:20:30Z"
    assert lease["spec"] == {"renewTime": "1969-12-31T23:59:59.500000Z", "leaseTransitions": 0}


def test_time_keeps_whole_seconds_and_microtime_truncates_nanoseconds() -> None:
    def pod_with(created: bytes) -> bytes:
        meta = _field(8, created)
        return _envelope("v1", "Pod", _field(1, meta))

    # seconds=1780000000 (2026-05-28T20:26:40Z), nanos=999999999
    ts = b"\x08" + _varint(1780000000) + b"\x10" + _varint(999_999_999)
    assert decode_k8s_protobuf(pod_with(ts))["metadata"]["creationTimestamp"] == "2026-05-28T20:26:40Z"
    assert decode_k8s_protobuf(pod_with(b""))["metadata"]["creationTimestamp"] is None
    lease_spec = _field(4, ts)  # renewTime, a MicroTime
    lease = decode_k8s_protobuf(_envelope("coordination.k8s.io/v1", "Lease", _field(2, lease_spec)))
    assert lease["spec"]["renewTime"] == "2026-05-28T20:26:40.999999Z"


def test_bytes_are_base64_as_in_json() -> None:
    raw = bytes(range(256))
    secret = _decode_one(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s"},
            "data": {"all": base64.b64encode(raw).decode()},
        }
    )
    assert base64.b64decode(secret["data"]["all"]) == raw


def test_negative_numbers_use_ten_byte_varints() -> None:
    body = encode_k8s_protobuf({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": -1})
    assert b"\x10" + b"\xff" * 9 + b"\x01" in body
    assert decode_k8s_protobuf(body)["value"] == -1


def test_packed_repeated_numbers_are_read_too() -> None:
    # PodSecurityContext.supplementalGroups (4, int64) packed, as a proto3 encoder would write it
    packed = _field(4, _varint(1) + _varint(300))
    spec = _field(14, packed)
    pod = decode_k8s_protobuf(_envelope("v1", "Pod", _field(2, spec)))
    assert pod["spec"]["securityContext"]["supplementalGroups"] == [1, 300]


def test_unknown_fields_are_skipped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    meta = _field(1, b"cm") + _field(999, b"future") + b"\xa8\x3e\x07"  # 999 (bytes), 999 (varint)
    body = _envelope("v1", "ConfigMap", _field(1, meta) + _field(88, b"\x08\x01"))
    with caplog.at_level(logging.DEBUG, logger="kubesched.cluster.protobuf"):
        assert decode_k8s_protobuf(body) == {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm"},
        }
    assert "meta.ObjectMeta#999" in caplog.text
    assert "core.ConfigMap#88" in caplog.text


# ------------------------------------------------------------------------------------------------------
# Errors


def test_unknown_kind_is_unsupported() -> None:
    with pytest.raises(UnsupportedKindError) as e:
        decode_k8s_protobuf(_envelope("example.com/v1", "Widget", b""))
    assert (e.value.api_version, e.value.kind) == ("example.com/v1", "Widget")
    assert "example.com/v1 Widget" in str(e.value)
    assert isinstance(e.value, ProtobufError)
    with pytest.raises(UnsupportedKindError):
        decode_k8s_protobuf(_envelope("v1", "", b""))


def test_delete_options_under_any_group_version() -> None:
    body = _envelope("apps/v1", "DeleteOptions", _field(4, b"Background"))
    assert decode_k8s_protobuf(body) == {
        "apiVersion": "apps/v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Background",
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"kind":"Pod"}', "must start with"),
        (MAGIC + b"\x0a\x05\x0a", "truncated"),
        (_envelope("v1", "Pod", b"\x0a\x80"), "truncated varint"),
        (_envelope("v1", "Pod", b"\x08\x01"), "expected a length-delimited"),
        (_envelope("v1", "Pod", _field(1, _field(7, b"x"))), "expected a varint"),  # generation as bytes
        (_envelope("v1", "Pod", b"\x0b"), "wire type 3"),
        (MAGIC + _field(1, _field(1, b"v1") + _field(2, b"Pod")) + _field(3, b"gzip"), "contentEncoding"),
    ],
)
def test_malformed_bodies(body: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        decode_k8s_protobuf(body)


def test_encoder_refuses_fields_outside_the_schema() -> None:
    with pytest.raises(ProtobufError, match=r"Pod\.spec\.containers\[0\].*imagePullPolcy"):
        encode_k8s_protobuf(
            {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"imagePullPolcy": "x"}]}}
        )
    with pytest.raises(UnsupportedKindError):
        encode_k8s_protobuf({"apiVersion": "v1", "kind": "Widget"})


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.sampled_from(sorted(KINDS)))
def test_arbitrary_bytes_decode_or_fail_cleanly(raw: bytes, kind: tuple[str, str]) -> None:
    try:
        obj = decode_k8s_protobuf(_envelope(*kind, raw))
    except ProtobufError:
        return
    json.dumps(obj)  # whatever decodes is plain JSON data


# ------------------------------------------------------------------------------------------------------
# Properties

_text = st.text(max_size=20)
_int32 = st.integers(-(2**31), 2**31 - 1)


@settings(max_examples=100, deadline=None)
@given(
    labels=st.dictionaries(_text, _text, max_size=5),
    data=st.dictionaries(_text, _text, max_size=5),
    binary=st.dictionaries(_text, st.binary(max_size=20), max_size=3),
    generation=st.integers(-(2**63), 2**63 - 1),
)
def test_configmap_round_trips(
    labels: dict[str, str], data: dict[str, str], binary: dict[str, bytes], generation: int
) -> None:
    meta: dict[str, Any] = {"name": "cm", "creationTimestamp": None}
    if generation:
        meta["generation"] = generation
    if labels:
        meta["labels"] = labels
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}
    if data:
        obj["data"] = data
    if binary:
        obj["binaryData"] = {k: base64.b64encode(v).decode() for k, v in binary.items()}
    assert _decode_one(obj) == obj


@settings(max_examples=100, deadline=None)
@given(
    replicas=st.one_of(st.none(), _int32),
    min_ready=_int32,
    paused=st.booleans(),
    surge=st.one_of(_int32, _text),
)
def test_deployment_scalars_round_trip(
    replicas: int | None, min_ready: int, paused: bool, surge: int | str
) -> None:
    spec: dict[str, Any] = {
        "selector": SELECTOR,
        "template": TEMPLATE,
        "strategy": {"rollingUpdate": {"maxSurge": surge}},
    }
    if replicas is not None:
        spec["replicas"] = replicas  # a pointer: kept even when 0
    if min_ready:
        spec["minReadySeconds"] = min_ready
    if paused:
        spec["paused"] = True
    obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": META, "spec": spec, "status": {}}
    assert _decode_one(obj) == obj


# ------------------------------------------------------------------------------------------------------
# Schema facts (spot checks against upstream generated.proto)


@pytest.mark.parametrize(
    ("message", "number", "name", "flags"),
    [
        ("meta.ObjectMeta", 8, "creationTimestamp", ""),
        ("meta.ObjectMeta", 11, "labels", "map"),
        ("core.PodSpec", 10, "nodeName", ""),
        ("core.PodSpec", 4, "terminationGracePeriodSeconds", "ptr"),
        ("core.PodSpec", 33, "topologySpreadConstraints", "repeated"),
        ("core.Container", 1, "name", "keep"),
        ("core.Volume", 2, "volumeSource", "inline"),
        ("apps.DeploymentSpec", 1, "replicas", "ptr"),
        ("core.ServicePort", 4, "targetPort", ""),
        ("core.Secret", 2, "data", "map"),
    ],
)
def test_schema_spot_checks(message: str, number: int, name: str, flags: str) -> None:
    f = MESSAGES[message].by_number[number]
    assert f.name == name
    assert (f.pointer, f.keep, f.inline, f.map, f.repeated) == tuple(
        flag in flags.split() for flag in ("ptr", "keep", "inline", "map", "repeated")
    )


def test_every_kind_has_its_message() -> None:
    assert all(name in MESSAGES for name in KINDS.values())


def test_json_names_match_the_official_clients_models() -> None:
    """An independent check of the schema's JSON names (and inlining) against kubernetes-client's models."""
    models = pytest.importorskip("kubernetes.client")
    # Fields the client knows that our upstream snapshot has no protobuf for (alpha types, newer fields).
    known_gaps = {
        "batch.JobSchedulingConfiguration": {
            "disruptionMode", "resourceClaims", "schedulingConstraints", "schedulingPolicy",
        },
        "core.NodeSystemInfo": {"runningInUserNamespace"},
        "authentication.TokenRequestSpec": {"attestations"},
        "authentication.UserInfo": {"extra"},
        "authorization.ResourceAttributes": {"fieldSelector", "labelSelector"},
        "authorization.SubjectAccessReviewSpec": {"extra"},
    }  # fmt: skip
    prefixes = {"core": ("CoreV1", "V1"), "events": ("EventsV1", "V1")}
    checked = 0
    for name, msg in MESSAGES.items():
        group, kind = name.split(".")
        candidates = [getattr(models, p + kind, None) for p in prefixes.get(group, ("V1",))]
        model = next((m for m in candidates if m is not None), None)
        if model is None:  # inline-only structs (VolumeSource, ProbeHandler...) have no model of their own
            continue
        theirs = set(model.attribute_map.values()) - known_gaps.get(name, set())
        assert msg.json_keys | {"apiVersion", "kind"} >= theirs, name
        assert theirs >= msg.json_keys - {"apiVersion", "kind"}, name
        checked += 1
    assert checked > 250
