"""Bad-input classes of the robust8 round (``scripts/bad_input_campaign.py --only r8:``).

- Characters a terminal acts on instead of showing (ESC sequences, a carriage return, a newline, BEL, DEL,
  C1 controls, bidirectional overrides) in a recipe's keys, words, file name or a flag's value reached the
  terminal raw inside notes, warnings and error lines: ``"a\\rprimus-launch: all good" = 1`` in a TorchTitan
  TOML showed as the line ``primus-launch: all good=1: not modelled``, a key with ``\\x1b[2J`` cleared the
  screen, one with a newline printed a line of its own.  Both streams write them as their escapes
  (``primus_launch.streams.shown``), stderr one line per diagnostic; the independent truth for the escapes
  is Python's own ``repr`` of a character it does not print.
- Bash builtins that set a variable (``printf -v``, ``read``, ``mapfile`` / ``readarray``, ``getopts``) are
  not run by the reader; the variable kept its earlier value without a word (``printf -v TP_SIZE %d 4``
  projected TP=2).  Said now, as ``let`` and ``((X *= 2))`` are.
- ``true`` / ``false`` where a ``--gpu-file`` GPU takes a number was read as 1 / 0 (pydantic's lax mode):
  ``gpus_per_node = true`` made one-GPU nodes, ``sustained_clock_fraction = true`` a full clock, without a
  word (the wrapper's ``[cluster]``, the ``[collectives]`` tables and the recipes refuse a boolean there).
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from cli_run import run_cli
from primus_launch.streams import Answer, Diagnostics, shown, trusted

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
YAML = (ROOT / "recipes/megatron/llama3.1_8b.yaml").read_text()

# C0 but tab / newline, DEL, C1, the bidi marks, embeddings, overrides and isolates, line / paragraph separators
ACTIVE = ([chr(c) for c in range(0x20) if chr(c) not in "\t\n"] + [chr(c) for c in range(0x7F, 0xA0)]
          + ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029"] + [chr(c) for c in range(0x202A, 0x202F)]
          + [chr(c) for c in range(0x2066, 0x206A)])
RAW = re.compile("[" + "".join(re.escape(c) for c in ACTIVE) + "]")


def test_shown_writes_each_active_character_as_repr_does():
    """Every character of the class is one Python does not print (``str.isprintable`` False), and is written
    as ``repr`` writes it; tab and newline stay (a newline too with ``one_line``); printable text is kept."""
    for c in ACTIVE:
        assert not c.isprintable(), repr(c)
        assert shown(f"a{c}b") == "a" + repr(c)[1:-1] + "b", repr(c)
    assert shown("a\tb\nc") == "a\tb\nc"
    assert shown("a\tb\nc", one_line=True) == "a\tb\\nc"
    text = "tokens/s/GPU 9,477 \u2014 MFU 49.3 % (\u00e9t\u00e9, \u4e2d\u6587)"
    assert shown(text, one_line=True) == text


def test_stderr_is_one_line_per_write_and_the_progress_bar_keeps_its_codes():
    """A diagnostic is one ``print`` (its text, then ``\\n``): a line break inside the text is escaped, the
    final one kept; rich's bar writes through ``trusted`` (its cursor codes are its own); stdout keeps its
    line breaks (tables) and escapes the rest."""
    raw = io.StringIO()
    err = Diagnostics(raw)
    print("primus-launch: note: key a\nprimus-launch: error: fake\x1b[2J", file=err)
    assert raw.getvalue() == "primus-launch: note: key a\\nprimus-launch: error: fake\\x1b[2J\n"
    bar = io.StringIO()
    trusted(Diagnostics(bar)).write("\r\x1b[?25ltune 3/8\x1b[?25h")
    assert bar.getvalue() == "\r\x1b[?25ltune 3/8\x1b[?25h"
    out = io.StringIO()
    Answer(out).write("model  r\x1b[31m\nlayers 32\n")
    assert out.getvalue() == "model  r\\x1b[31m\nlayers 32\n"


@pytest.mark.parametrize("key", ["k\x1b[2Jx", "a\rprimus-launch: all good", "a\nprimus-launch: error: fake",
                                 "k\u202ex", "k\x85x", "k\x07x"], ids=["csi", "cr", "newline", "rlo", "nel", "bel"])
def test_a_toml_key_with_a_control_character_is_one_escaped_error(tmp_path, key):
    """The key is no field of TorchTitan's [training]: refused as v0.2's ConfigManager refuses it (titanval; it was
    a not-modelled warning), in one line with the control character escaped (a line break shown as a space)."""
    (tmp_path / "r.toml").write_text(TOML.replace("[training]", f"[training]\n{json.dumps(key)} = 1", 1))
    rc, out, err, _ = run_cli(["--project", "r.toml", "--dry-run", "--json"], tmp_path)
    assert rc == 2, err[-600:]
    assert not RAW.search(out + err), err[-600:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert all(ln.startswith("primus-launch: ") for ln in lines), lines
    assert len([ln for ln in lines if ln.startswith("primus-launch: error:")]) == 1, lines
    assert "primus-launch: error: training." in err and "=1: not a field of TorchTitan's [training]" in err


def test_the_text_answer_and_an_error_line_escape_them_too(tmp_path):
    (tmp_path / "r.sh").write_text(BASH.replace("    --bf16\n", "    --bf16 '--x\x1b]0;pwned\x07y'\n", 1))
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--explain"], tmp_path)
    assert rc == 0 and not RAW.search(out + err), (out + err)[-600:]
    assert "--x\\x1b]0;pwned\\x07y" in out + err
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--ray-address", "h\x1b[2J\nprimus-launch: ok"],
                              tmp_path)
    assert rc == 2 and not RAW.search(err)
    assert err.splitlines() == ["primus-launch: error: --ray-address=h\\x1b[2J\\nprimus-launch: ok: only with --tune "
                                "(it runs the search's shards on a Ray cluster)"]


@pytest.mark.parametrize("snippet,words", [
    ('printf -v TP_SIZE "%d" 4\n', "'printf -v TP_SIZE \"%d\" 4' not evaluated"),
    ('printf -vTP_SIZE "%d" 4\n', "'printf -vTP_SIZE \"%d\" 4' not evaluated"),
    ('read -r TP_SIZE <<< "4"\n', "'read -r TP_SIZE <<< \"4\"' not evaluated"),
    ("mapfile -t LINES < /dev/null\n", "'mapfile -t LINES' not evaluated"),
    ("readarray -t LINES < /dev/null\n", "'readarray -t LINES' not evaluated"),
    ('while getopts "t:" o; do TP_SIZE=$OPTARG; done\n', "'getopts \"t:\" o' not evaluated"),
    # read17: after a NAME=value prefix the builtin was not recognised (no note: TP_SIZE kept silently)
    ('IFS=, read -r TP_SIZE PP <<< "4,2"\n', "'IFS=, read -r TP_SIZE PP <<< \"4,2\"' not evaluated"),
], ids=["printf-v", "printf-vNAME", "read", "mapfile", "readarray", "getopts", "IFS-prefixed-read"])
def test_bash_builtins_that_set_a_variable_are_noted(tmp_path, snippet, words):
    """The value projected is the one from before (TP=2, as the script states above the builtin), and said."""
    (tmp_path / "r.sh").write_text(BASH.replace("SEQ_LENGTH=8192\n", "SEQ_LENGTH=8192\n" + snippet, 1))
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    assert rc == 0, err[-600:]
    assert words in err and "keeps its value from before" in err, err[-800:]
    assert json.loads(out)["plan"]["parallel"]["tp"] == 2


def test_printf_without_v_is_no_assignment(tmp_path):
    (tmp_path / "r.sh").write_text(BASH.replace("SEQ_LENGTH=8192\n", 'SEQ_LENGTH=8192\nprintf "%s\\n" -v\n', 1))
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--json"], tmp_path)
    assert rc == 0 and "not evaluated" not in err, err[-600:]


GPU = ('[gpu.mygpu]\nvendor = "custom"\npeak_flops_bf16 = 989e12\nhbm_bytes = 85899345920\nhbm_bw = 3.35e12\n'
       'intra_node_bw = 450e9\nintra_node_topology = "switch"\ninter_node_bw = 50e9\n')


@pytest.mark.parametrize("key", ["gpus_per_node", "num_sms", "sustained_clock_fraction", "nvlink_domain", "tdp_watts",
                                 "intra_node_latency_s", "power_limit_w", "hbm_bw"])
def test_a_boolean_where_a_gpu_file_takes_a_number_is_refused(tmp_path, key):
    (tmp_path / "r.sh").write_text(BASH)
    text = GPU.replace("hbm_bw = 3.35e12\n", "") if key == "hbm_bw" else GPU
    (tmp_path / "g.toml").write_text(text + f"{key} = true\n")
    rc, out, err, _ = run_cli(["--project", "r.sh", "--dry-run", "--json", "--gpu-file", "g.toml", "--gpu", "mygpu"],
                              tmp_path)
    assert rc == 2 and out == "", err
    assert err.splitlines() == [f"primus-launch: error: --gpu-file='g.toml': [gpu.mygpu]: gpu.mygpu.{key}=True: a number"]


def test_every_numeric_gpu_field_is_held_to_a_number():
    """The refusal covers every numeric field of GPUSpec (one check on the model, not a list of names)."""
    from primus_launch.projection.hardware.gpus import GPUSpec

    base = dict(name="x", vendor="custom", peak_flops_bf16=989e12, peak_flops_fp8=989e12, hbm_bytes=8e10, hbm_bw=3e12,
                intra_node_bw=4.5e11, intra_node_topology="switch", inter_node_bw=5e10)
    GPUSpec.model_validate(base)
    numeric = [k for k, f in GPUSpec.model_fields.items() if f.annotation not in (str,)]
    assert len(numeric) >= 15
    for key in numeric:
        with pytest.raises(ValueError, match=f"gpu.x.{key}=True: a number"):
            GPUSpec.model_validate({**base, key: True})


@pytest.mark.parametrize("argv", [["--project", "r.sh", "--dry-run", "--json"], ["--project", "r.sh", "--dry-run"]],
                         ids=["json", "text"])
def test_a_closed_stdout_is_one_line_not_a_silent_success(tmp_path, argv):
    """``primus-launch ... >&-``: Python starts with ``sys.stdout`` None; the answer was dropped and the run
    exited 0 (``ls >&-`` says ``write error: Bad file descriptor`` and exits 2).  The passthrough command
    keeps its own status (its stdout is its business)."""
    import shlex
    import subprocess
    import sys

    (tmp_path / "r.sh").write_text(BASH)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    cmd = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "primus_launch", *argv]) + " >&-"
    r = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-600:]
    assert r.stderr.splitlines()[-1] == "primus-launch: error: stdout: cannot write: Bad file descriptor (stdout is closed)"
    passthrough = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "primus_launch", "--", "sh", "-c", "exit 3"])
    r = subprocess.run(["bash", "-c", passthrough + " >&-"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
    assert (r.returncode, r.stderr) == (3, "")
