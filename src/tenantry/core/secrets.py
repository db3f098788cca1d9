"""What a credential file looks like: shared by the policy and the index.

The policy refuses agents the files these patterns name; the index does not
store their text (so ``tenantry grep`` never serves a key, and no copy of one
sits in the index's database), and the job service does not read a job's output
where it resolves to one. Pure but for ``own_home`` (the password database).
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import pwd
import re
from functools import lru_cache

# Credential locations relative to a home directory (globs on the resolved path).
HOME_SECRETS = (
    ".ssh",
    ".ssh/*",
    ".gnupg",
    ".gnupg/*",
    ".netrc",
    ".pgpass",
    ".my.cnf",
    ".git-credentials",
    ".vault-token",
    ".pypirc",
    ".npmrc",
    ".docker/config.json",
    ".aws",
    ".aws/*",
    ".azure",
    ".azure/*",
    ".config/gcloud",
    ".config/gcloud/*",
    ".kube/config",
    ".config/gh/hosts.yml",
    ".password-store",
    ".password-store/*",
    ".local/share/keyrings/*",
    ".globus/*",
    ".condor/tokens.d/*",
    ".ssh2/*",
    ".munge/*",
    ".config/rclone/rclone.conf",
    ".s3cfg",
    ".boto",
    ".mc/config.json",
    ".huggingface/token",
    ".cache/huggingface/token",
    ".config/tenantry/token*",
    # more tools' tokens: backups of the files above, hub, Terraform, Databricks,
    # Weights & Biases, Kaggle, the Hugging Face cache's stored tokens, Docker's other file
    ".netrc*",
    ".pgpass*",
    ".git-credentials*",
    ".config/hub",
    ".terraform.d/credentials.tfrc.json",
    ".databrickscfg",
    ".config/wandb/*",
    ".kaggle/kaggle.json",
    ".cache/huggingface/stored_tokens",
    ".docker/.token_seed*",
    ".config/containers/auth.json",
    ".config/git/credentials",
    ".ssh-agent*",
    # the agent CLIs' own logins (an injected prompt that reads them takes the user's
    # model account), Cargo's and iRODS's passwords, Subversion's cached logins,
    # GitLab's and Copilot's tokens, Maven's and Gradle's repository passwords, OCI keys
    ".claude/.credentials.json",
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".local/share/opencode/auth.json",
    ".config/github-copilot/*.json",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".irods/.irodsA",
    ".subversion/auth",
    ".subversion/auth/*",
    ".config/glab-cli/config.yml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".oci",
    ".oci/*",
    # browsers' saved logins and cookies
    ".mozilla/firefox/*/logins.json",
    ".mozilla/firefox/*/key4.db",
    ".mozilla/firefox/*/cookies.sqlite",
    ".config/google-chrome/*/Login Data",
    ".config/google-chrome/*/Cookies",
    ".config/chromium/*/Login Data",
    ".config/chromium/*/Cookies",
)
SECRET_NAMES = re.compile(
    r"^(id_(rsa|dsa|ecdsa|ed25519)(_sk)?|.*\.(ppk)|munge\.key|\.netrc|\.pgpass|"
    r"\.git-credentials|\.vault-token|krb5cc_.*|.*\.keytab|"
    r"\.env|\.env\.(?!example$|sample$|template$|dist$)[\w.-]+|.*\.(pem|p12|pfx|jks)|"
    r"[\w.-]*private[\w.-]*\.key|credentials\.json|service[-_]account[\w.-]*\.json)$"
)
# directories that hold credentials wherever they are (a copied ~/.ssh keeps its class)
SECRET_DIRS = frozenset({".ssh", ".gnupg", ".aws", ".password-store", ".azure", ".oci", ".munge"})


@lru_cache(maxsize=64)
def _home_regex(home: str) -> re.Pattern[str]:
    pats: list[str] = []
    for rel in HOME_SECRETS:
        pat = posixpath.join(home, rel)
        pats.extend((pat, pat + "/*"))
    return re.compile("|".join(fnmatch.translate(p) for p in pats))


def is_secret_file(path: str, home: str = "") -> bool:
    """Is the file at absolute ``path`` a credential: a key's or token's name
    (``id_ed25519``, ``*.pem``, ``.netrc``), inside a secret directory (``.ssh``,
    ``.gnupg``, ``.aws``), or a home's credential location (``~/.kube/config``)?"""
    if SECRET_NAMES.match(posixpath.basename(path)):
        return True
    if not SECRET_DIRS.isdisjoint(path.split("/")):
        return True
    home = home.rstrip("/")
    if not home or not path.startswith(home + "/"):
        return False
    # every home location is a dot-entry of the home (``.kube/config``, ``.netrc``)
    return path[len(home) + 1 : len(home) + 2] == "." and bool(_home_regex(home).match(path))


@lru_cache(maxsize=1)
def own_home() -> str:
    """This process's user's home from the password database (not ``$HOME``, which
    whoever started the process chose)."""
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return ""
