"""The operator: installs and maintains the scheduler through a ``KubeScheduler`` resource, as OpenShift's
cluster-kube-scheduler-operator does (see ``contract.py`` for the names the controllers share)."""
