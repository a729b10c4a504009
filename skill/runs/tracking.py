"""A run's experiment tracker: where it writes, the alerts it gets, and where run_status says to look.

The recipe names the tracker (``report_to``: skill.recipe.deciding.tracking); the worker sets it up here, in its own
process, before TRL imports the tracker (trackio reads ``TRACKIO_DIR`` once, when imported):

- trackio: project and run name are the run's id; the database lives under the state root
  (``<state root>/trackio``) unless the user set trackio's own ``TRACKIO_DIR``. No Space unless the user set
  ``TRACKIO_SPACE_ID`` (trackio's own switch) or the recipe's ``trackio_space_id``.
- W&B: offline unless the user configured W&B (``WANDB_MODE`` set, ``WANDB_API_KEY`` set, or a login in
  ``~/.netrc``): a process without a key and without a terminal would otherwise stop at wandb's login.
  Files under the run directory (``WANDB_DIR``) unless the user set that.
- TensorBoard: event files in ``<run dir>/tensorboard`` (transformers' ``TENSORBOARD_LOGGING_DIR``) unless set.

Health warnings go to the tracker as alerts: after each logged step the worker runs the checks run_status runs
(skill.runs.health) on metrics.jsonl and sends each warning code once, with the text run_status shows (reading
and checking 500 logged steps takes 12 ms, 2,000 take 48 ms: measured on this 2-core machine, 2026-12-05). trackio
stores them with the run (``trackio.alert``); W&B online sends them (``wandb.alert``), offline W&B has no
alerts (they are skipped, with a note); TensorBoard has no alerts at all. What was sent is kept in alerts.jsonl, so a
resumed run does not send it again.
"""

from __future__ import annotations

import json
import netrc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from skill.grpo_fields import GRPOFields
from skill.recipe.deciding.tracking import trackers_of
from skill.recipe.schema import GRPORecipe
from skill.runs.health import diagnose, shape_of, what_to_change
from skill.runs.health_warning import HealthWarning
from skill.runs.store import append_jsonl, read_jsonl
from skill.state import write_atomically

TRACKING_FILE = "tracking.json"
ALERTS_FILE = "alerts.jsonl"  # the warning codes sent so far, one line each: a resumed attempt does not resend them
WANDB_HOST = "api.wandb.ai"  # W&B's cloud API host, the machine wandb login writes to ~/.netrc
WANDB_PROJECT = "grpo-rlvr"  # transformers' WandbCallback reads WANDB_PROJECT (default 'huggingface')
WANDB_TITLE_LIMIT = 64  # wandb.alert: "The title of the alert, must be less than 64 characters long"


class Tracking(BaseModel):
    """Where one tracker shows a run, and the command that opens it."""

    tracker: str
    project: str | None = None
    location: str = Field(description="The directory the tracker writes to, or the URL it shows the run at.")
    command: str | None = Field(default=None, description="The command that opens the dashboard.")
    note: str | None = Field(default=None, description="What the tracker does not get (alerts offline, ...).")


def wandb_configured(environ: Mapping[str, str]) -> bool:
    """Whether the user set W&B up: a key in the environment or a ``wandb login`` in the netrc file.

    >>> wandb_configured({"WANDB_API_KEY": "x"}), wandb_configured({"NETRC": "/nonexistent"})
    (True, False)
    """
    if environ.get("WANDB_API_KEY"):
        return True
    path = Path(environ.get("NETRC") or Path.home() / ".netrc")
    try:
        return path.is_file() and netrc.netrc(str(path)).authenticators(WANDB_HOST) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def tracker_environment(run_dir: Path, trackers: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The environment variables the run's trackers need; a location the user set is kept.

    >>> env = tracker_environment(Path("/s/runs/r1"), ["trackio", "wandb"], {"NETRC": "/nonexistent"})
    >>> env["TRACKIO_DIR"], env["WANDB_MODE"], env["WANDB_DIR"]
    ('/s/trackio', 'offline', '/s/runs/r1')
    >>> tracker_environment(Path("/s/runs/r1"), ["trackio"], {"TRACKIO_DIR": "/mine"})["TRACKIO_DIR"]
    '/mine'
    """
    wanted: dict[str, str] = {}
    if "trackio" in trackers:
        wanted["TRACKIO_DIR"] = str(run_dir.parent.parent / "trackio")  # runs live in <state root>/runs/<run id>
    if "wandb" in trackers:
        wanted["WANDB_DIR"] = str(run_dir)
        wanted["WANDB_PROJECT"] = WANDB_PROJECT
        wanted["WANDB_MODE"] = "online" if wandb_configured(environ) else "offline"
    if "tensorboard" in trackers:
        wanted["TENSORBOARD_LOGGING_DIR"] = str(run_dir / "tensorboard")
    return {name: environ.get(name) or value for name, value in wanted.items()}


def where_it_shows(tracker: str, run_id: str, environment: Mapping[str, str]) -> Tracking:
    """Where a tracker shows the run before it starts (W&B's run directory or URL is filled in once it does).

    >>> where_it_shows("trackio", "r1", {"TRACKIO_DIR": "/s/trackio"}).command
    'TRACKIO_DIR=/s/trackio trackio show --project r1'
    """
    if tracker == "trackio":
        space = environment.get("TRACKIO_SPACE_ID")
        if space:
            return Tracking(tracker=tracker, project=run_id, location=f"https://huggingface.co/spaces/{space}")
        directory = environment["TRACKIO_DIR"]
        command = f"TRACKIO_DIR={directory} trackio show --project {run_id}"
        return Tracking(tracker=tracker, project=run_id, location=directory, command=command)
    if tracker == "wandb":
        offline = environment["WANDB_MODE"] == "offline"
        return Tracking(
            tracker=tracker,
            project=environment["WANDB_PROJECT"],
            location=str(Path(environment["WANDB_DIR"]) / "wandb"),
            note="offline (W&B not configured here): no alerts; `wandb sync` uploads the run" if offline else None,
        )
    directory = environment["TENSORBOARD_LOGGING_DIR"]
    return Tracking(
        tracker=tracker,
        location=directory,
        command=f"tensorboard --logdir {directory}",
        note="TensorBoard has no alerts: health warnings are in run_status",
    )


def start_tracking(run_dir: Path, trl: dict[str, Any], writer: bool) -> dict[str, Any]:
    """Set the trackers' environment in this (the worker's) process, record where they show the run
    (tracking.json, rank 0), and return the GRPOConfig values the runner sets for them (project, run_name).
    Call before anything imports TRL's trainer, which imports the tracker. ``trl``: the recipe's GRPOConfig kwargs.

    >>> start_tracking(Path("/s/runs/r1"), {"report_to": "none"}, writer=True)
    {}
    """
    fields = GRPOFields(trl)
    trackers = trackers_of(fields.report_to)
    if not trackers:
        return {}
    environment = tracker_environment(run_dir, trackers, os.environ)
    os.environ.update(environment)
    if writer:
        space = fields.trackio_space_id  # the caller's Space, when the recipe names one
        shown_in = {**os.environ, **({"TRACKIO_SPACE_ID": space} if space else {})}
        shown = [where_it_shows(tracker, run_dir.name, shown_in).model_dump() for tracker in trackers]
        write_atomically(run_dir / TRACKING_FILE, json.dumps(shown, indent=1))
    return {"project": run_dir.name, "run_name": run_dir.name}


def read_tracking(run_dir: Path) -> list[Tracking]:
    """Where the run's trackers show it, as its worker recorded it ([] before it starts, or with no tracker).

    >>> read_tracking(Path("/nonexistent"))
    []
    """
    path = run_dir / TRACKING_FILE
    return [Tracking.model_validate(row) for row in json.loads(path.read_text())] if path.is_file() else []


def alert_text(warning: HealthWarning) -> str:
    """An alert's text: the warning as run_status shows it, with what to change.

    >>> alert_text(HealthWarning(code="kl_blowup", severity="warning", message="KL climbing.",
    ...                          symptom="kl_blowup", suggested_variant="kl_control"))
    'KL climbing. Change: apply variant kl_control (emit_grpo_config(symptoms=["kl_blowup"])).'
    """
    return f"{warning.message} Change: {what_to_change(warning)}.".replace("..", ".")


def send_alert(tracker: str, warning: HealthWarning, step: int) -> str | None:
    """Send one warning to one tracker; returns a note when it was not sent.

    >>> send_alert("tensorboard", HealthWarning(code="kl_blowup", severity="warning", message="KL climbing."), 3)
    'tensorboard takes no alerts here (none in TensorBoard)'
    """
    title, text = f"GRPO health: {warning.code}"[:WANDB_TITLE_LIMIT], alert_text(warning)
    if tracker == "trackio":
        import trackio

        level = trackio.AlertLevel.ERROR if warning.severity == "critical" else trackio.AlertLevel.WARN
        trackio.alert(title=title, text=text, level=level)
        return None
    if tracker == "wandb" and os.environ.get("WANDB_MODE") not in ("offline", "disabled", "dryrun"):
        import wandb

        level = wandb.AlertLevel.ERROR if warning.severity == "critical" else wandb.AlertLevel.WARN
        wandb.run.alert(title=title, text=f"{text} (step {step})", level=level)
        return None
    return f"{tracker} takes no alerts here ({'offline' if tracker == 'wandb' else 'none in TensorBoard'})"


def make_alert_callback(run_dir: Path, recipe: GRPORecipe) -> Any:
    """A TrainerCallback sending each new health warning (by code) to the run's trackers; None with no tracker.
    Added after the callback that writes metrics.jsonl, so each read sees the step just logged."""
    from transformers import TrainerCallback

    trackers = trackers_of(recipe.grpo.report_to)
    if not trackers:
        return None
    shape = shape_of(recipe.trl, recipe.launch.training_processes, recipe.evaluation)

    class HealthAlerts(TrainerCallback):
        """After each log on rank 0: the health checks on the metrics so far, and a new warning as an alert."""

        def __init__(self) -> None:
            self.sent = {row["code"] for row in read_jsonl(run_dir / ALERTS_FILE)}  # a resumed run's, too

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero and "wandb" in trackers:
                record_wandb_run(run_dir)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or not state.is_world_process_zero:
                return
            metrics = read_jsonl(run_dir / "metrics.jsonl")
            found = diagnose(metrics, recipe.rewards, recipe.grpo.max_completion_length, shape, state.max_steps)
            for warning in found:
                if warning.code in self.sent:
                    continue
                self.sent.add(warning.code)
                append_jsonl(run_dir / ALERTS_FILE, {"step": state.global_step, "code": warning.code})
                for tracker in trackers:
                    try:
                        note = send_alert(tracker, warning, state.global_step)
                    except Exception as exc:  # a tracker's failure never stops training
                        note = f"{tracker} refused the alert: {type(exc).__name__}: {exc}"
                    print(f"health alert {warning.code} at step {state.global_step}: {note or 'sent to ' + tracker}")

    return HealthAlerts()


def record_wandb_run(run_dir: Path) -> None:
    """W&B's run, once its callback started it: the offline run directory and the `wandb sync` command, or the
    online run's URL, into tracking.json."""
    import wandb

    if wandb.run is None:
        return
    shown = read_tracking(run_dir)
    for entry in shown:
        if entry.tracker != "wandb":
            continue
        if entry.note:  # offline
            entry.location = str(Path(wandb.run.dir).parent)
            entry.command = f"wandb sync {entry.location}"
        else:
            entry.location = str(wandb.run.url)
    write_atomically(run_dir / TRACKING_FILE, json.dumps([entry.model_dump() for entry in shown], indent=1))
