"""Bad-input classes of the robust10 round (``scripts/bad_input_campaign.py --only r10:``).

Each case runs the CLI's ``main`` in this process and checks the rule: a non-zero exit, one ``primus-launch:
error:`` line naming the field and the value, no traceback; or, where the framework takes the input, the reading
the framework makes of it.

- Megatron-LM flags abbreviated (``--num-layer 32``, ``--micro-batch 2``, ``--tensor-model-parallel 2``): Megatron-LM's
  parser is built with ``allow_abbrev=False`` (``megatron/training/arguments.py`` ``parse_args``) and exits with
  "unrecognized arguments"; the reader noted them as unknown flags and projected the default (TP=1).
- torchrun's own options abbreviated (``--nproc-per 8``, ``--nnode 2``): torchrun's parser leaves argparse's
  ``allow_abbrev`` on and takes them; a script was read as 1 process per node and a command was refused.  An
  ambiguous prefix (``--nproc``) is refused, as torch does.
- A word no Megatron-LM flag takes (``--sequence-parallel false``, ``--lr 3e-4 1e-4``, the blank a backslash followed
  by a space passes): Megatron-LM's parser has no positional arguments and refuses it; the reader skipped it, so
  ``--use-distributed-optimizer False`` projected the distributed optimizer on.
- bash ``$'...'`` strings were read as ``$`` and the text (``TP=$'4'`` gave ``$4``); ``declare -i`` assignments were
  read as text (``declare -i TP=2*2`` refused as no integer; bash sets 4).
- primus-launch's own options were abbreviated by argparse: ``--gpus 64`` was read as ``--gpus-per-node 64``.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from primus_launch.cli import main
from test_bad_input_robust9 import refused  # the one error line of a refused run (exit 2, naming words)

ROOT = Path(__file__).resolve().parents[1]
BASH = (ROOT / "recipes/megatron/llama3.1_8b.sh").read_text()
ARGS = ["--num-layers", "32", "--hidden-size", "4096", "--num-attention-heads", "32", "--seq-length", "4096",
        "--max-position-embeddings", "4096", "--micro-batch-size", "1", "--global-batch-size", "64", "--bf16",
        "--vocab-size", "32000"]


def run(capsys, args: list[str]) -> tuple[int, str, str]:
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def project(tmp_path, capsys, text: str, *extra: str) -> tuple[int, str, str]:
    (tmp_path / "r.sh").write_text(text)
    return run(capsys, ["--project", str(tmp_path / "r.sh"), "--dry-run", *extra])


# ------------------------------------------------------------------------------------- abbreviations
@pytest.mark.parametrize("written, whole", [("--num-layers 32", "--num-layer 32"),
                                            ("--micro-batch-size $MICRO_BATCH_SIZE", "--micro-batch $MICRO_BATCH_SIZE"),
                                            ("--tensor-model-parallel-size $TP_SIZE", "--tensor-model-parallel $TP_SIZE"),
                                            ("--bf16", "--bf1"),
                                            ("--lr 3.0e-4", "--lr-warmup-it 3")])
def test_abbreviated_megatron_flag_is_refused(tmp_path, capsys, written, whole):
    """Megatron-LM builds its parser with allow_abbrev=False (megatron/training/arguments.py parse_args, core_r0.16.0
    and main), so an abbreviation is an unrecognized argument there; the line names it and the flag it abbreviates."""
    assert written in BASH
    rc, _, err = project(tmp_path, capsys, BASH.replace(written, whole))
    flag = whole.split()[0]
    line = refused(rc, err, flag, "allow_abbrev=False")
    assert "--num-layers" in line or "-size" in line or "--bf16" in line or "--lr-warmup-iters" in line


def test_megatron_dest_spelled_as_a_flag_is_no_abbreviation(tmp_path, capsys):
    """``--overlap-p2p-comm`` (the dest of --no-overlap-p2p-communication, from a YAML key) starts
    --overlap-p2p-communication-warmup-flush but is noted as an unknown flag, as before (a validation row has it)."""
    rc, out, err = project(tmp_path, capsys, BASH.replace("--bf16", "--bf16 --overlap-p2p-comm"), "--explain")
    assert rc == 0, err[-300:]
    assert "unknown Megatron-LM flag --overlap-p2p-comm" in out + err


def test_torchrun_abbreviations_read_as_torch_reads_them(tmp_path, capsys):
    """The independent truth: torch.distributed.run's own parser (allow_abbrev left on) on the same words."""
    from torch.distributed.run import get_args_parser

    words = ["--nnode", "2", "--nproc-per", "4"]
    ns = get_args_parser().parse_args([*words, "pretrain_gpt.py"])
    assert (ns.nnodes, ns.nproc_per_node) == ("2", "4")
    script = BASH.replace("--nproc_per_node $GPUS_PER_NODE", "--nproc-per 4").replace("--nnodes $NUM_NODES", "--nnode 2")
    rc, out, err = project(tmp_path, capsys, script, "--json")
    assert rc == 0, err[-300:]
    assert '"num_gpus": 8' in out
    rc, out, err = run(capsys, ["--project", "--dry-run", "--json", "--", "torchrun", *words, "pretrain_gpt.py", *ARGS])
    assert rc == 0, err[-300:]
    assert '"num_gpus": 8' in out


def test_legacy_launcher_option_is_read(tmp_path, capsys):
    """``python -m torch.distributed.launch --use_env``: the deprecated launcher's own switch (its parse_args adds it to
    torchrun's parser) was refused as no torchrun option."""
    from torch.distributed.launch import parse_args

    ns = parse_args(["--use_env", "--nproc_per_node", "4", "pretrain_gpt.py"])
    assert ns.use_env and ns.nproc_per_node == "4"
    rc, out, err = run(capsys, ["--project", "--dry-run", "--json", "--", "python", "-m", "torch.distributed.launch",
                                "--use_env", "--nproc_per_node", "4", "pretrain_gpt.py", *ARGS])
    assert rc == 0, err[-300:]
    assert '"num_gpus": 4' in out


def test_standalone_rendezvous_on_several_nodes_is_refused(tmp_path, capsys):
    """``torchrun --standalone --nnodes 2``: torch sets each node's rendezvous to a c10d store at localhost:0
    (torch/distributed/run.py ``if args.standalone``), so the nodes never meet; it was projected as 2 nodes."""
    import inspect

    import torch.distributed.run as run_mod

    assert 'args.rdzv_endpoint = "localhost:0"' in inspect.getsource(run_mod)
    script = BASH.replace("--nnodes $NUM_NODES", "--nnodes 2 --standalone")
    rc, _, err = project(tmp_path, capsys, script)
    refused(rc, err, "--nnodes='2'", "--standalone")
    rc, _, err = run(capsys, ["--project", "--dry-run", "--", "torchrun", "--standalone", "--nnodes", "2",
                              "--nproc-per-node", "8", "pretrain_gpt.py", *ARGS])
    refused(rc, err, "--nnodes='2'", "--standalone")
    rc, out, err = run(capsys, ["--project", "--dry-run", "--json", "--", "torchrun", "--standalone", "--nnodes", "1",
                                "--nproc-per-node", "8", "pretrain_gpt.py", *ARGS])
    assert rc == 0, err[-300:]


def test_ambiguous_torchrun_prefix_is_refused(tmp_path, capsys):
    """torch's parser: ``--nproc`` could match --nproc-per-node and --nproc_per_node (argparse 'ambiguous option')."""
    import argparse

    from torch.distributed.run import get_args_parser

    p = get_args_parser()
    with pytest.raises(SystemExit):
        p.error = lambda msg: (_ for _ in ()).throw(SystemExit(msg))  # type: ignore[method-assign]
        p.parse_args(["--nproc", "4", "x.py"])
    assert isinstance(p, argparse.ArgumentParser)
    rc, _, err = project(tmp_path, capsys, BASH.replace("--nproc_per_node $GPUS_PER_NODE", "--nproc 4"))
    refused(rc, err, "--nproc", "ambiguous", "--nproc-per-node")
    rc, _, err = run(capsys, ["--project", "--dry-run", "--", "torchrun", "--nproc", "4", "pretrain_gpt.py", *ARGS])
    refused(rc, err, "--nproc", "ambiguous")


# ------------------------------------------------------------------------------------- words no flag takes
@pytest.mark.parametrize("written, bad, words", [
    ("--sequence-parallel\n", "--sequence-parallel false\n", ("--sequence-parallel", "'false'", "switch")),
    ("--use-distributed-optimizer\n", "--use-distributed-optimizer False\n", ("--use-distributed-optimizer", "False")),
    ("--lr 3.0e-4", "--lr 3.0e-4 1e-4", ("--lr", "'1e-4'")),
])
def test_word_no_megatron_flag_takes_is_refused(tmp_path, capsys, written, bad, words):
    """Megatron-LM's parser has no positional arguments: ``--sequence-parallel false`` exits with 'unrecognized
    arguments: false' (the switch was projected on)."""
    assert written in BASH
    rc, _, err = project(tmp_path, capsys, BASH.replace(written, bad, 1))
    refused(rc, err, *words)


def test_flag_and_value_quoted_into_one_word_is_refused(tmp_path, capsys):
    """``"--tensor-model-parallel-size 4"`` as one word: argparse takes a word holding a blank for a positional
    argument (``_parse_optional``), so Megatron-LM refuses it; the reader noted an unknown flag and projected TP=1."""
    import argparse

    p = argparse.ArgumentParser(allow_abbrev=False)
    p.add_argument("--tensor-model-parallel-size", type=int, default=1)
    assert p.parse_known_args(["--tensor-model-parallel-size 4"])[1] == ["--tensor-model-parallel-size 4"]
    text = BASH.replace("    --tensor-model-parallel-size $TP_SIZE\n", '    "--tensor-model-parallel-size 4"\n')
    text = text.replace("${MODEL_PARALLEL_ARGS[@]}", '"${MODEL_PARALLEL_ARGS[@]}"')
    assert text.count('"--tensor-model-parallel-size 4"') == 1
    rc, _, err = project(tmp_path, capsys, text)
    refused(rc, err, "argument='--tensor-model-parallel-size 4'", "--tensor-model-parallel-size=4")


def test_crlf_script_with_continuations_is_refused_naming_the_line_ends(tmp_path, capsys):
    """A script saved with CR LF everywhere: a '\\' then CR passes the CR as an argument and ends the command
    (bash), which Megatron-LM refuses; the line says the file's line ends (it was projected, with a note)."""
    rc, _, err = project(tmp_path, capsys, BASH.replace("\n", "\r\n"))
    refused(rc, err, "argument='\\r'", "end in CR LF")


def test_backslash_followed_by_a_blank_is_refused_naming_it(tmp_path, capsys):
    """``\\`` then a space at a line's end passes " " and ends the command (bash): the flags below were dropped."""
    text = BASH.replace("    ${TRAINING_ARGS[@]} \\\n", "    ${TRAINING_ARGS[@]} \\ \n")
    rc, _, err = project(tmp_path, capsys, text)
    refused(rc, err, "argument=' '", "blank")
    rc, _, err = project(tmp_path, capsys, BASH.replace("pretrain_gpt.py \\\n", "pretrain_gpt.py \\ \n"))
    refused(rc, err, "argument=' '")


# ------------------------------------------------------------------------------------- bash constructs
@pytest.mark.parametrize("line", ["readonly TP_SIZE=4\nTP_SIZE=8", "declare -r TP_SIZE=4\nexport TP_SIZE=2",
                                  "TP_SIZE=4\nreadonly TP_SIZE\nTP_SIZE+=1", "TP_SIZE=4\nunset -f TP_SIZE\nTP_SIZE=${TP_SIZE:-2}",
                                  "readonly TP_SIZE=4\nunset TP_SIZE\nTP_SIZE=${TP_SIZE:-2}",
                                  "TP_SIZE=2\n((TP_SIZE *= 2))", "TP_SIZE=2\nlet TP_SIZE=TP_SIZE*2",
                                  "TP_SIZE=3\n((TP_SIZE++))", "X=1\n((X += 1, TP_SIZE = X * 2))",
                                  "TP_SIZE=4\n((TP_SIZE /= 0))",
                                  "N=TP_VAL\nTP_VAL=4\nTP_SIZE=${!N}", "N=A[2]\nA=(1 2 4)\nTP_SIZE=${!N}",
                                  "TP_SIZE=$'4'", "TP_SIZE=$'\\x34'", "TP_SIZE=$'\\064'", "declare -i TP_SIZE=2*2",
                                  "typeset -i TP_SIZE=8/2", "declare -i TP_SIZE=1\nTP_SIZE+=3",
                                  "PP=1\ndeclare -i TP_SIZE\nTP_SIZE=PP+3"])
def test_bash_values_read_as_bash_sets_them(tmp_path, capsys, line):
    """The independent truth: bash itself running the lines as a script (not ``-c``: a script goes on after an
    assignment to a readonly variable fails), printing the variable."""
    (tmp_path / "truth.sh").write_text(f"{line}\nprintf %s \"$TP_SIZE\"\n")
    got = subprocess.run(["bash", str(tmp_path / "truth.sh")], capture_output=True, text=True, timeout=10).stdout
    assert got == "4"
    rc, out, err = project(tmp_path, capsys, BASH.replace("TP_SIZE=2\n", line + "\n", 1))
    assert rc == 0, err[-300:]
    assert "TP=4" in out


def test_case_modification_read_and_other_expansions_named(tmp_path, capsys):
    """``${X^^}`` was opaque text (a tokenizer name upper-cased failed as 'comes from a command substitution');
    ``${X/4/8}`` is still not evaluated, and the line now says it is a parameter expansion."""
    got = subprocess.run(["bash", "-c", "X=rope; printf %s ${X,,}${X^}"], capture_output=True, text=True,
                         timeout=10).stdout
    assert got == "ropeRope"
    text = BASH.replace("--position-embedding-type rope", "--position-embedding-type ${PE,,}").replace(
        "TP_SIZE=2\n", "TP_SIZE=2\nPE=ROPE\n", 1)
    rc, out, err = project(tmp_path, capsys, text)
    assert rc == 0, err[-300:]
    rc, _, err = project(tmp_path, capsys, BASH.replace("TP_SIZE=2\n", "X=4\nTP_SIZE=${X/4/8}\n", 1))
    refused(rc, err, "--tensor-model-parallel-size='${X/4/8}'", "a parameter expansion the reader does not evaluate")


# ------------------------------------------------------------------------------------- primus-launch's options
@pytest.mark.parametrize("flag, whole", [("--gpus", "--gpus-per-node"), ("--proj", "--project"), ("--dry", "--dry-run")])
def test_own_option_abbreviation_is_refused(tmp_path, capsys, flag, whole):
    (tmp_path / "r.sh").write_text(BASH)
    args = ["--project", str(tmp_path / "r.sh"), "--dry-run", flag, "8"] if flag == "--gpus" else \
        [flag, str(tmp_path / "r.sh"), "--dry-run"] if flag == "--proj" else ["--project", str(tmp_path / "r.sh"), flag]
    with pytest.raises(SystemExit) as e:
        main(args)
    _, err = capsys.readouterr()
    refused(e.value.code, err, flag, whole)


# ------------------------------------------------------------------------------------- choices, --switch=VALUE
@pytest.mark.parametrize("written, bad, words", [
    ("--lr-decay-style cosine", "--lr-decay-style Cosine", ("--lr-decay-style='Cosine'", "did you mean cosine?")),
    ("--ckpt-format torch_dist", "--ckpt-format torch-dist", ("--ckpt-format='torch-dist'", "did you mean torch_dist?")),
    ("--bf16\n", "--bf16=true\n", ("--bf16='true'", "ignored explicit argument")),
    ("--sequence-parallel\n", "--sequence-parallel=false\n", ("--sequence-parallel='false'", "switch")),
])
def test_misspelt_choice_and_switch_with_a_value_are_refused(tmp_path, capsys, written, bad, words):
    """argparse's own verdicts on Megatron-LM's flags (choices=[...] exits with 'invalid choice'; a store_true
    option given ``=VALUE`` with 'ignored explicit argument'): checked here on a parser built the same way."""
    import argparse

    p = argparse.ArgumentParser(allow_abbrev=False)
    p.add_argument("--lr-decay-style", choices=["constant", "linear", "cosine", "inverse-square-root", "WSD"])
    p.add_argument("--bf16", action="store_true")
    p.error = lambda msg: (_ for _ in ()).throw(SystemExit(msg))  # type: ignore[method-assign]
    for argv in (["--lr-decay-style", "Cosine"], ["--bf16=true"]):
        with pytest.raises(SystemExit):
            p.parse_args(argv)
    assert written in BASH
    rc, _, err = project(tmp_path, capsys, BASH.replace(written, bad, 1))
    refused(rc, err, *words)


def test_choice_of_another_version_is_noted_and_read(tmp_path, capsys):
    """``--transformer-impl te`` is no choice in core_r0.16.0 / main / dev, but a value outside the three versions'
    choices that misspells none may be another version's or fork's (a validation row runs ``--optimizer aurora``):
    read as written, with a note."""
    rc, out, err = project(tmp_path, capsys, BASH.replace("--bf16\n", "--bf16 --empty-unused-memory-level 3\n"),
                           "--explain")
    assert rc == 0, err[-300:]
    assert "--empty-unused-memory-level 3: not among its choices" in out + err


# ------------------------------------------------------------------------------------- TorchTitan booleans (tyro)
TOML = (ROOT / "recipes/torchtitan/llama3.1_8b.toml").read_text()
LAUNCH = (ROOT / "recipes/torchtitan/llama3_8b_launch.sh").read_text()


@dataclasses.dataclass
class _Compile:
    enable: bool = True


@dataclasses.dataclass
class _Job:
    compile: _Compile = dataclasses.field(default_factory=_Compile)


def _tyro_verdicts() -> dict[str, object]:
    """tyro (torchtitan's parser from v0.1 to v0.3) on a boolean field: the flag pair, no value."""
    import tyro

    out: dict[str, object] = {}
    for words in ("--compile.no-enable", "--compile.enable=False", "--compile.enable False"):
        try:
            out[words] = tyro.cli(_Job, args=words.split()).compile.enable
        except SystemExit:
            out[words] = "refused"
    return out


def test_titan_job_command_booleans_read_as_tyro_reads_them(tmp_path, capsys, monkeypatch):
    """``--job.config_file`` commands (torchtitan <= 0.2): ``--compile.no-enable`` was an unknown key (compile kept
    on), ``--compile.enable False`` / ``=False`` were read as off; tyro reads the first as off and refuses the
    others."""
    truth = _tyro_verdicts()
    assert truth == {"--compile.no-enable": False, "--compile.enable=False": "refused", "--compile.enable False": "refused"}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.toml").write_text(TOML)
    head = ["--project", "--dry-run", "--explain", "--", "torchrun", "--nproc-per-node", "8", "-m", "torchtitan.train",
            "--job.config_file", "t.toml"]
    rc, out, err = run(capsys, head + ["--compile.no-enable"])
    assert rc == 0, err[-300:]
    assert "torch.compile" not in out and "no_enable" not in out + err
    for words in ("--compile.enable=False", "--compile.enable False"):
        rc, _, err = run(capsys, head + words.split())
        refused(rc, err, "--compile.enable='False'", "--compile.no-enable")
    rc, _, err = run(capsys, head + ["--training.steps", "10", "20"])
    refused(rc, err, "unexpected argument '20'")


def test_titan_launch_boolean_with_a_value_is_refused(tmp_path, capsys):
    """torchtitan 0.3 launch lines: ``--compile.enable=False`` was read as off; tyro refuses it."""
    assert "--compile.enable " in LAUNCH
    rc, _, err = project(tmp_path, capsys, LAUNCH.replace("--compile.enable ", "--compile.enable=False "))
    refused(rc, err, "--compile.enable='False'", "--compile.no-enable")


def test_titan_field_cut_short_is_refused(tmp_path, capsys, monkeypatch):
    """``--parallelism.tensor_parallel 2`` (a field cut short: no torchtitan JobConfig has it, tyro takes no
    abbreviations) was listed as not modelled and TP=1 projected."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.toml").write_text(TOML)
    rc, _, err = run(capsys, ["--project", "--dry-run", "--", "torchrun", "--nproc-per-node", "8", "-m",
                              "torchtitan.train", "--job.config_file", "t.toml", "--parallelism.tensor_parallel", "2"])
    refused(rc, err, "parallelism.tensor_parallel=2", "did you mean parallelism.tensor_parallel_degree?")


# ------------------------------------------------------------------------------------- outputs through links
def test_output_through_proc_fd_link_is_refused_and_the_link_kept(tmp_path, capsys):
    """``--report /dev/stdout`` with the output sent to a file: /dev/stdout -> /proc/self/fd/1 -> that file, so the
    checks passed, and the atomic write renamed a regular file over the link (as root, /dev/stdout itself, for every
    process of the machine).  A link of the test's own stands for it (never the system's)."""
    import os

    (tmp_path / "r.sh").write_text(BASH)
    link = tmp_path / "stdout-link"
    os.symlink("/proc/self/fd/1", link)
    rc, _, err = run(capsys, ["--project", str(tmp_path / "r.sh"), "--dry-run", "--report", str(link)])
    refused(rc, err, "--report=", "names an open file of this process")
    assert os.path.islink(link) and os.readlink(link) == "/proc/self/fd/1"


def test_output_through_a_link_is_written_where_it_leads(tmp_path, capsys):
    """A link to a regular file: the file is replaced (atomically), the link stays (the link was replaced by a
    regular file and its target left as it was); a dangling link or a loop is refused naming it."""
    import os

    (tmp_path / "r.sh").write_text(BASH)
    (tmp_path / "target.json").write_text("old")
    os.symlink("target.json", tmp_path / "link.json")
    rc, _, err = run(capsys, ["--project", str(tmp_path / "r.sh"), "--dry-run", "--trace", str(tmp_path / "link.json")])
    assert rc == 0, err[-300:]
    assert os.path.islink(tmp_path / "link.json") and (tmp_path / "target.json").read_text() != "old"
    os.symlink("nowhere/x.json", tmp_path / "dangling.json")
    os.symlink("loop-b", tmp_path / "loop-a")
    os.symlink("loop-a", tmp_path / "loop-b")
    for name, words in (("dangling.json", "which does not exist"), ("loop-a", "a loop of symbolic links")):
        rc, _, err = run(capsys, ["--project", str(tmp_path / "r.sh"), "--dry-run", "--trace", str(tmp_path / name)])
        refused(rc, err, "--trace=", words)
        assert os.path.islink(tmp_path / name)


# ------------------------------------------------------------------------------------- functional-test MODEL_ARGS
_FT = """\
MODEL_ARGS:
  --num-layers: 4
  --hidden-size: 512
  --num-attention-heads: 8
  --seq-length: 1024
  --max-position-embeddings: 1024
  --micro-batch-size: 1
  --global-batch-size: 16
  --vocab-size: 1000
  --tokenizer-type: NullTokenizer
  --tensor-model-parallel-size: 2
  --sequence-parallel: SP
  --bf16: true
"""


@pytest.mark.parametrize("value, ok", [("true", True), ("'true'", True), ("false", False), ("1", False), ("on", False)])
def test_functional_test_switch_takes_true_only(tmp_path, capsys, value, ok):
    """Megatron-LM's functional-test runner (tests/functional_tests/shell_test_utils/_run_training.sh, main): a value
    equal to "true" becomes the bare flag, anything else ``--flag VALUE``, which Megatron-LM's parser refuses
    ('unrecognized arguments'); the reader read ``--sequence-parallel: false`` as off."""
    (tmp_path / "model_config.yaml").write_text(_FT.replace("SP", value))
    rc, out, err = run(capsys, ["--project", str(tmp_path / "model_config.yaml"), "--dry-run", "--gpus-per-node", "8"])
    if ok:
        assert rc == 0, err[-300:]
        assert "SP=on" in out
    else:
        refused(rc, err, "--sequence-parallel=", "true, or the key left out")
