# The batch grader in a container: Python 3.11, bubblewrap, CPU torch and this repository.
#
#   docker build -f docker/grader.Dockerfile -t course-grader .
#   mkdir -p reports
#   docker run --rm --network none \
#       --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
#       --security-opt systempaths=unconfined \
#       -v "$PWD/submissions:/submissions:ro" -v "$PWD/reports:/reports" \
#       course-grader /submissions --out /reports --jobs 2
#
# Add --exercise ex01 (any grader flag) after the folder; the files in reports/ belong to root
# unless you add --user "$(id -u):$(id -g)".
#
# What bubblewrap needs inside a container. Collected from bubblewrap's and Flatpak's issue
# trackers (containers/bubblewrap#505, flatpak/flatpak#2867); this repository's CI has no
# Docker engine, so the run line above is not tested here:
# * seccomp: Docker's default profile refuses the unshare/clone calls that create namespaces
#   (bwrap: "No permissions to create new namespace", or "pivot_root: Operation not
#   permitted"). seccomp=unconfined lifts it; a custom profile that also allows clone,
#   unshare, mount, umount2 and pivot_root is the narrower alternative.
# * AppArmor: Docker's docker-default profile refuses bwrap's mounts ("Failed to make /
#   slave: Permission denied"). apparmor=unconfined lifts it; hosts without AppArmor ignore it.
# * /proc: Docker masks parts of /proc, and the kernel then refuses the fresh /proc that
#   bwrap mounts for the submission's PID namespace. systempaths=unconfined lifts the mask.
# * The host kernel must allow unprivileged user namespaces. Ubuntu 23.10 and later refuse
#   one to an AppArmor-unconfined process ("setting up uid map: Permission denied") until the
#   host sets kernel.apparmor_restrict_unprivileged_userns=0.
# --privileged also works, but hands the container every device and capability of the host;
# prefer the three options. Podman's default seccomp profile already allows namespaces, so
# there systempaths=unconfined (plus label=disable under SELinux) should be enough: untested.
# The grader probes bubblewrap before it grades: with an option missing it refuses (exit
# status 2) and prints bwrap's own error, so the container never grades unsandboxed by accident.

FROM python:3.11.9-slim-bookworm

RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*

# CPU torch first, so the course's own range (torch>=2.2) is already met when it installs.
ARG TORCH_SPEC="torch>=2.2"
RUN pip install --no-cache-dir --index-url https://download.pytorch.org/whl/cpu "${TORCH_SPEC}"

# Editable, so solutions/ (the quiz key, hidden from every submission) sits where the grader looks.
WORKDIR /course
COPY pyproject.toml README.md ./
COPY course_lib course_lib
COPY course_tools course_tools
COPY solutions solutions
RUN pip install --no-cache-dir -e ".[instructor]"

# The grader hides the home folder from submissions: never let it be / (a --user without a
# passwd entry gets HOME=/).
ENV HOME=/home/grader
RUN mkdir -p -m 1777 /home/grader

ENTRYPOINT ["python", "-m", "course_tools.grade"]
