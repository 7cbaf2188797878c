#!/usr/bin/python3
"""W5's peer: the hyper-parameter search with pruning of /work/shared/workloads.md, as Optuna's
users run it, with PyTorch objectives written to the other peers' recipe.

  optuna_w5.py --out OUT.json [--workers N] [--cores 0,1] [--trials 81] [--train 10000]
               [--val 2000] [--test 10000] [--max-epochs 9] [--seed 0] [--no-prune] [--work DIR]
  optuna_w5.py --compare A.json B.json       same study? (exit code 0 when the same, 1 when not)

Optuna (Debian python3-optuna, 3.1): one study in the file-based journal storage
(JournalStorage(JournalFileStorage(path))) shared by N worker processes, each pinned to one core
with one torch thread (torch_peer.setup), each with its own RandomSampler and
SuccessiveHalvingPruner(min_resource=1, reduction_factor=3). The space of W5 (workloads.W5_SPACE)
through trial.suggest_*: family mlp|cnn, the rest conditional on it. A trial trains up to
--max-epochs epochs and after each one reports its validation accuracy (trial.report(value,
epoch)) and asks trial.should_prune(); it does not ask after its last epoch, where stopping would
save nothing (Optuna's pruner would otherwise mark a trial that trained every epoch "pruned"). A
trial that completes is evaluated on the test images (user attribute test_accuracy).

Choices a careful user makes, each written down because it decides a figure:
- Worker w's sampler is RandomSampler(seed + w). Every process would otherwise draw the same
  sequence of configurations (each sampler has its own generator), half of 2 workers' trials
  being duplicates. With one worker this is RandomSampler(seed).
- Exactly --trials trials: a worker takes the study's trial count and asks for a trial under one
  file lock (fcntl), then trains without it, and tells the result (Optuna's ask-and-tell, the same
  Trial API as optimize's objective). optimize(n_trials=...) per process, or MaxTrialsCallback,
  would let two workers both start the 81st.
- A trial's torch generator is seeded from (seed, trial number) before the model is built:
  initialisation, shuffling and dropout depend on the trial, not on which worker runs it.
Data: Fashion-MNIST's .gz IDX files (torch_peer.Data): the first --train training images train,
the next --val validate (the metric: val_accuracy, maximised), the first --test test images test.
Inputs /255, Keras initialisers, Adam(lr, eps=1e-7), sparse categorical cross-entropy on logits.

The JSON written to --out: wall_seconds (spawning the workers to the last one's exit: imports,
data loading and every trial), epochs_trained (every epoch of every trial), trials, complete,
pruned, failed, best {number, params, val_accuracy, test_accuracy, epochs}, per_worker (core,
trials, seconds, cpu_seconds), load_average (1 min, before and after), fingerprint (per trial in
number order: params, state, the reported [epoch, value] pairs) and fingerprint_sha256. Two runs are the same study when their
fingerprints are equal (same_study, --compare).
"""
import argparse
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import workloads  # noqa: E402

STUDY = "w5"


def suggest(trial):
    """The W5 space through trial.suggest_*, in workloads.W5_SPACE's order; the parameters of
    the family not drawn are not suggested (Optuna's conditional spaces)."""
    p = {}
    for name, kind, args, family in workloads.W5_SPACE:
        if family is not None and p["family"] != family:
            continue
        names = [f"{name}_{i}" for i in range(p["depth"])] if name == "width" else [name]
        for n in names:
            if kind == "choice":
                p[n] = trial.suggest_categorical(n, args)
            elif kind in ("int", "int_log"):
                p[n] = trial.suggest_int(n, args[0], args[1], log=kind == "int_log")
            else:
                p[n] = trial.suggest_float(n, args[0], args[1], log=kind == "loguniform")
    return p


def trial_seed(seed, number):
    return (seed * 1000003 + number * 7919 + 17) % (2**63)


def accuracy(model, x, y):
    import torch
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, x.shape[0], 1000):
            correct += int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum())
    model.train()
    return correct / x.shape[0]


def run_trial(trial, data, a):
    """Trains one trial; returns (state name, value, epochs trained)."""
    import torch
    import torch.nn.functional as F
    import torch_peer
    x, y, xv, yv, xt, yt = data
    p = suggest(trial)
    torch.manual_seed(trial_seed(a.seed, trial.number))
    model = torch_peer.build_model({"workload": "w5", "params": p})
    opt = torch.optim.Adam(model.parameters(), lr=p["lr"], betas=(0.9, 0.999), eps=1e-7)
    bs, n = p["batch_size"], x.shape[0]
    model.train()
    value = None
    for epoch in range(1, a.max_epochs + 1):
        perm = torch.randperm(n)
        for i in range(0, n, bs):
            idx = perm[i:i + bs]
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
        value = accuracy(model, xv, yv)
        trial.report(value, epoch)
        if epoch < a.max_epochs and trial.should_prune():
            return "pruned", value, epoch
    trial.set_user_attr("test_accuracy", accuracy(model, xt, yt))
    return "complete", value, a.max_epochs


def load_data(a):
    import torch_peer
    x, y, xt, yt = torch_peer.Data(a.fmnist_dir, None).get("w1")
    need = a.train + a.val
    if x.shape[0] < need or xt.shape[0] < a.test:
        raise SystemExit(f"optuna_w5: failed to split Fashion-MNIST in {a.fmnist_dir}: expected "
                         f"at least {need} training and {a.test} test images, got {x.shape[0]} "
                         f"and {xt.shape[0]}")
    return (x[:a.train], y[:a.train], x[a.train:need], y[a.train:need], xt[:a.test], yt[:a.test])


def make_storage(path):
    import warnings
    import optuna
    from optuna.storages import JournalFileStorage, JournalStorage
    # 3.1 marks the journal storage experimental; it is the file storage its docs name for
    # processes sharing a study without a database server.
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return JournalStorage(JournalFileStorage(path))


def make_pruner(a):
    import optuna
    if a.no_prune:
        return optuna.pruners.NopPruner()
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=1,
                                                  reduction_factor=workloads.W5_REDUCTION)


def worker(a):
    """One pinned worker: asks for trials until the study holds --trials, trains each."""
    import optuna
    from optuna.trial import TrialState
    import torch_peer
    t0 = time.perf_counter()
    torch_peer.setup(a.core)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    data = load_data(a)
    study = optuna.load_study(study_name=STUDY, storage=make_storage(a.storage),
                              sampler=optuna.samplers.RandomSampler(seed=a.seed + a.index),
                              pruner=make_pruner(a))
    done = 0
    lock_path = a.storage + ".ask.lock"
    while True:
        with open(lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if len(study.get_trials(deepcopy=False)) >= a.trials:
                break
            trial = study.ask()
        state, value, _ = run_trial(trial, data, a)
        study.tell(trial, value if state == "complete" else None,
                   state=TrialState.COMPLETE if state == "complete" else TrialState.PRUNED)
        done += 1
    # CPU seconds beside the wall clock: on a shared machine the wall clock counts other
    # processes' turns on this core, the CPU time only this worker's own work.
    print(json.dumps({"index": a.index, "core": a.core, "trials": done,
                      "seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time()}),
          flush=True)


def fingerprint(trials):
    """Per trial, in number order: what it drew, how it ended, what it reported."""
    return [{"number": t.number, "params": dict(sorted(t.params.items())),
             "state": t.state.name.lower(),
             "values": [[s, v] for s, v in sorted(t.intermediate_values.items())]}
            for t in sorted(trials, key=lambda t: t.number)]


def same_study(a, b):
    """(same?, the first few differences) of two runs' results (this script's JSON)."""
    fa, fb = a["fingerprint"], b["fingerprint"]
    diffs = []
    if len(fa) != len(fb):
        diffs.append(f"{len(fa)} trials against {len(fb)}")
    for x, y in zip(fa, fb):
        for key in ("params", "state", "values"):
            if x[key] != y[key]:
                diffs.append(f"trial {x['number']}: {key} {x[key]} against {y[key]}")
    return not diffs, diffs[:5]


def summarize(study, a, wall, per_worker, loads):
    import optuna
    import torch
    from optuna.trial import TrialState
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    fp = fingerprint(trials)
    best = None
    if complete:
        t = max(complete, key=lambda t: (t.value, -t.number))
        best = {"number": t.number, "params": t.params, "val_accuracy": t.value,
                "test_accuracy": t.user_attrs.get("test_accuracy"),
                "epochs": len(t.intermediate_values)}
    return {"peer": "optuna", "optuna": optuna.__version__, "torch": torch.__version__,
            "workers": len(per_worker), "seed": a.seed, "trials_asked": a.trials,
            "n_train": a.train, "n_val": a.val, "n_test": a.test, "max_epochs": a.max_epochs,
            "pruner": "none" if a.no_prune else "successive_halving",
            "wall_seconds": wall, "load_average": loads, "trials": len(trials),
            "epochs_trained": sum(len(t.intermediate_values) for t in trials),
            "complete": len(complete),
            "pruned": sum(t.state == TrialState.PRUNED for t in trials),
            "failed": sum(t.state not in (TrialState.COMPLETE, TrialState.PRUNED)
                          for t in trials),
            "best": best, "per_worker": per_worker, "fingerprint": fp,
            "fingerprint_sha256": hashlib.sha256(
                json.dumps(fp, sort_keys=True).encode()).hexdigest()}


def worker_command(a, index, core, storage):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--index", str(index),
           "--core", str(core), "--storage", storage]
    for k in ("trials", "train", "val", "test", "max_epochs", "seed", "fmnist_dir"):
        cmd += [f"--{k.replace('_', '-')}", str(getattr(a, k))]
    return cmd + (["--no-prune"] if a.no_prune else [])


def launch(a):
    """Creates the study, runs the pinned workers, writes the summary JSON."""
    import optuna
    cores = [int(c) for c in a.cores.split(",")] if a.cores else sorted(os.sched_getaffinity(0))
    if len(cores) < a.workers:
        raise SystemExit(f"optuna_w5: failed to pin {a.workers} workers: expected as many cores, "
                         f"got {cores}")
    work = a.work or os.path.splitext(os.path.abspath(a.out))[0] + "-study"
    os.makedirs(work, exist_ok=True)
    storage = os.path.join(work, "journal.log")
    for stale in (storage, storage + ".ask.lock"):
        if os.path.exists(stale):
            os.remove(stale)  # a new study each run
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    optuna.create_study(study_name=STUDY, storage=make_storage(storage), direction="maximize",
                        sampler=optuna.samplers.RandomSampler(seed=a.seed), pruner=make_pruner(a))
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    procs = [subprocess.Popen(worker_command(a, w, cores[w], storage), stdout=subprocess.PIPE,
                              text=True, env=env) for w in range(a.workers)]
    outs = [p.communicate()[0] for p in procs]
    wall = time.perf_counter() - t0
    bad = [w for w, p in enumerate(procs) if p.returncode != 0]
    if bad:
        raise SystemExit(f"optuna_w5: worker(s) {bad} failed (exit codes "
                         f"{[procs[w].returncode for w in bad]}); their errors are above")
    per_worker = [json.loads(o.strip().splitlines()[-1]) for o in outs]
    study = optuna.load_study(study_name=STUDY, storage=make_storage(storage))
    r = summarize(study, a, wall, per_worker, [load0, os.getloadavg()[0]])
    tmp = f"{a.out}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(r, f, indent=1)
    os.replace(tmp, a.out)
    print(json.dumps({k: r[k] for k in ("wall_seconds", "trials", "epochs_trained", "pruned",
                                        "best", "fingerprint_sha256")}))


def compare(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append(json.load(f))
    same, diffs = same_study(*runs)
    print(json.dumps({"same": same, "differences": diffs}))
    return 0 if same else 1


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="the summary JSON to write")
    ap.add_argument("--compare", nargs=2, metavar="JSON", help="same study? of two runs' JSON")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cores", help="the cores to pin the workers to (default: this process's)")
    ap.add_argument("--trials", type=int, default=workloads.W5_TRIALS)
    ap.add_argument("--train", type=int, default=workloads.W5_TRAIN)
    ap.add_argument("--val", type=int, default=workloads.W5_VAL)
    ap.add_argument("--test", type=int, default=workloads.W5_TEST)
    ap.add_argument("--max-epochs", type=int, default=workloads.W5_MAX_EPOCHS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-prune", action="store_true", help="every trial trains --max-epochs")
    ap.add_argument("--work", help="the study's folder (default: next to --out)")
    ap.add_argument("--fmnist-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--core", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--storage", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    for k in ("workers", "trials", "train", "val", "test", "max_epochs"):
        if getattr(a, k) < 1:
            ap.error(f"--{k.replace('_', '-')}: expected at least 1, got {getattr(a, k)}")
    if not (a.compare or a.worker or a.out):
        ap.error("expected --out (a search), or --compare A.json B.json")
    return a


def main():
    a = parse_args()
    if a.compare:
        sys.exit(compare(a.compare))
    if a.worker:
        worker(a)
    else:
        launch(a)


if __name__ == "__main__":
    main()
