"""Authentication and authorization of the local cluster, as kube-apiserver does them.

- ``user.py`` the identity a request carries and the well-known user and group names;
- ``tokens.py`` service-account JWTs (TokenRequest issues them, the authenticator verifies them);
- ``authn.py`` request authentication: client certificates, bearer tokens, anonymous;
- ``rbac.py`` the RBAC authorizer over Roles, ClusterRoles and their bindings, with a per-subject index;
- ``bootstrap.py`` the ClusterRoles, Roles and bindings a fresh cluster has;
- ``reviews.py`` TokenReview, SubjectAccessReview and friends, and TokenRequest.
"""
