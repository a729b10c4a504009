"""The inspection contracts: what is inspected, what was found, and what a reviewer said."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skill.absolute_paths import LocalModelOrNamed
from skill.data import DatasetSpec
from skill.models.sources import EMBEDDED_MODEL_ID
from skill.rewards.spec import RewardSpec
from skill.sampling.schema import SamplingEngine

MAX_SAMPLES = 100
QUICK_SAMPLES = 10  # a quick check scores this many: enough to see a reward's inputs, too few for a read


class SuppliedSample(BaseModel):
    """One sampled output to inspect, with the dataset columns its rewards read."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    prompt: Any = Field(description="Text or chat messages.")
    completion: str
    columns: dict[str, Any] = Field(default_factory=dict, description="Dataset columns, e.g. {'answer': '12'}.")
    group: int | None = Field(default=None, description="Prompt group (samples of one prompt share it).")


class GenerateSamples(BaseModel):
    """Sample the policy as route_check's probe does."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    model: LocalModelOrNamed = Field(
        default=EMBEDDED_MODEL_ID, description="A hub id, a local model directory or the embedded id."
    )
    rows: list[dict[str, Any]] | None = Field(default=None, description="Rows with the prompt and reward columns.")
    dataset: DatasetSpec | None = None
    prompt_column: str = Field(default="prompt", description="The prompt's column in rows (a dataset names its own).")
    engine: SamplingEngine = Field(default_factory=SamplingEngine)
    num_prompts: int = Field(default=8, gt=0)
    n: int = Field(default=8, gt=0, description="Completions per prompt.")
    temperature: float = Field(default=1.0, gt=0)
    max_new_tokens: int = Field(default=256, gt=0)
    seed: int = 3407

    @field_validator("dataset", mode="before")
    @classmethod
    def _dataset_by_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _one_source(self) -> GenerateSamples:
        if (self.rows is None) == (self.dataset is None):
            raise ValueError("send exactly one of rows or dataset")
        return self


class InspectionRequest(BaseModel):
    """Which rewards to inspect, and on which samples (exactly one source)."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    rewards: list[RewardSpec] = Field(min_length=1)
    samples: list[SuppliedSample] | None = None
    route_decision_id: str | None = Field(default=None, description="Reuse a route_check probe's samples.")
    samples_of: str | None = Field(default=None, description="Reuse an earlier inspection's samples and labels.")
    generate: GenerateSamples | None = None
    tokenizer: LocalModelOrNamed | None = Field(
        default=None,
        description="The model whose tokenizer gives rewards completion_ids (default: generate's model, else "
        "4-character pseudo-ids).",
    )
    quick: bool = Field(
        default=False,
        description=f"Score the first {QUICK_SAMPLES} samples and show every score and extracted answer, to "
        "check a reward's inputs: not a read (nothing is stored, record_review cannot take it), and the samples "
        "shown are seen from then on.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> InspectionRequest:
        given = [self.samples, self.route_decision_id, self.samples_of, self.generate]
        if sum(source is not None for source in given) != 1:
            raise ValueError("send exactly one of samples, route_decision_id, samples_of or generate")
        return self


class SampleResult(BaseModel):
    """One sample as every reward judged it."""

    id: int
    prompt: Any
    completion: str
    columns: dict[str, Any] = Field(default_factory=dict)
    group: int | None = None
    scores: dict[str, float | None]
    total: float | None = Field(description="Weighted sum; None when a reward gave None.")
    extracted: dict[str, str | None] = Field(default_factory=dict, description="Answer each extracting reward read.")
    errors: dict[str, str] = Field(default_factory=dict)


class RewardStats(BaseModel):
    """Distribution of one reward over the samples."""

    mean: float | None
    std: float | None
    minimum: float | None
    maximum: float | None
    none_rate: float
    failure_rate: float
    distinct_values: int
    length_correlation: float | None = Field(description="Pearson r between the score and the completion's length.")
    zero_variance_groups: float | None = Field(description="Share of prompt groups where this reward is constant.")
    seconds: float
    read_share: float | None = Field(
        default=None, description="Share of the samples it found an answer in (None: it does not show what it reads)."
    )


class Flag(BaseModel):
    """Something the reader must look at; blocking flags stop the gate until fixed."""

    code: str
    severity: Literal["blocking", "warning"]
    reward: str | None = None
    message: str
    fix: str = Field(default="", description="What to change (every blocking flag says it).")
    evidence: list[int] = Field(default_factory=list, description="Sample ids that show it.")


class ProbeResult(BaseModel):
    """A known hack tried against one reward, judged by that reward's role and by the weighted total."""

    reward: str
    probe: str
    completion: str
    score: float | None
    expected: str = Field(description="What an honest reward of this role gives it, e.g. '0' or 'below the gold'.")
    reference_score: float | None = Field(description="The reward's score for the correct completion it compares to.")
    total: float | None = Field(default=None, description="Weighted total of every reward on it (None counts 0).")
    total_bar: float | None = Field(
        default=None, description="The correct-but-malformed total a hacked output must not beat."
    )
    hacked: bool
    why: str = Field(default="", description="Which rule it broke: its role's limit, or the weighted total.")
    fix: str = Field(default="", description="What to change when hacked.")


Label = Literal["pass", "fail", "unsure"]
ReviewerKind = Literal["human", "agent", "program"]


class Amendment(BaseModel):
    """A blind label changed after the reveal, because the reader misread the sample: who, when and why."""

    sample_id: int
    role: str = Field(description="The reward role the label judges (correctness, format or judge).")
    label: Label
    reason: str
    reviewer: str = ""
    reviewer_kind: ReviewerKind = "human"
    at: str = ""


class Disagreement(BaseModel):
    """A sample where a reward and the reader's blind label differ: named after the reveal, resolved by fixing the
    reward (a new inspection re-scores the same labels) or by amending the label with a reason."""

    sample_id: int
    reward: str
    role: str
    reward_said: Literal["pass", "fail"]
    score: float
    reader_said: Literal["pass", "fail"]
    extracted: str | None = Field(default=None, description="What the reward read from the completion, if it says.")
    resolved: bool = Field(default=False, description="True once the label was amended to the reward's judgment.")


class Agreement(BaseModel):
    """How far a reward agrees with the reader's first labels, counting only labels given blind."""

    reward: str
    role: str
    samples: int = Field(description="Samples with a decided (pass/fail) first label given blind, and a score.")
    reader_passes: int
    reward_passes: int
    disagreeing: int = Field(description="Of those samples, the ones where the reward and the first label differ.")
    p_value: float = Field(
        description="Fisher's exact test, one-sided: the chance that labels unrelated to the reward agree this well."
    )


class Review(BaseModel):
    """A blind read: labels first (no score shown), then the reveal, then each disagreement resolved."""

    reviewer: str
    reviewer_kind: ReviewerKind
    labels: dict[int, dict[str, Label]] = Field(
        default_factory=dict, description="sample id -> role -> the blind label, as first submitted (never changed)."
    )
    carried: dict[int, str] = Field(
        default_factory=dict,
        description="sample id -> the earlier inspection whose read labelled it (samples_of: the same reader's).",
    )
    seen_before: dict[int, list[str]] = Field(
        default_factory=dict,
        description="sample id -> the roles labelled after the sample's content had been revealed on this state "
        "root: recorded, never counted.",
    )
    labelled_at: str = ""
    amendments: list[Amendment] = Field(default_factory=list)
    disagreements: list[Disagreement] = Field(default_factory=list)
    agreement: list[Agreement] = Field(default_factory=list)
    accept_unread: bool = Field(default=False, description="Trains on the rewards unread, by explicit acknowledgement.")
    accept_unread_reason: str = ""
    notes: str = ""
    recorded_at: str = ""


class InspectionReport(BaseModel):
    """Everything inspect_rewards found, and the gate's verdict."""

    id: str
    created_at: str
    rewards: list[RewardSpec]
    reward_fingerprint: str
    fingerprint_parts: dict[str, str] = Field(
        default_factory=dict, description="Each fingerprinted part's hash: names the reward that changed since."
    )
    source: str = Field(description="Where the samples came from.")
    policy_model: str | None = Field(
        default=None,
        description="The model that wrote the samples (route_check's probe or generate); None: supplied samples.",
    )
    samples: list[SampleResult]
    stats: dict[str, RewardStats]
    flags: list[Flag]
    probe_results: list[ProbeResult]
    review: Review | None = None
    verdict: Literal["pending", "passed", "failed", "accepted_unread"] = Field(
        default="pending",
        description="passed: read and labelled; accepted_unread: trained on unread by explicit acknowledgement "
        "(stamped 'reward not reviewed' on the recipe, the run and the model); failed: see verdict_reasons.",
    )
    verdict_reasons: list[str] = Field(default_factory=list)
    draw: str = Field(default="", description="How the samples to read were drawn from the ones collected.")
    quick: bool = Field(default=False, description="A quick check: every score shown, never stored, not a read.")
    read_roles: list[str] = Field(
        default_factory=list, description="The reward roles the reader labels (correctness, format, judge)."
    )
    seconds: float = 0.0
    paths: dict[str, str] = Field(default_factory=dict, description="The stored report and its Markdown / HTML.")


class AmendmentRequest(BaseModel):
    """A blind label changed after the reveal (the sample or the task's rule misread), with the reason."""

    model_config = ConfigDict(extra="forbid")

    sample_id: int
    role: str
    label: Label
    reason: str = Field(min_length=1)


class ReviewRequest(BaseModel):
    """A reader's blind labels, or amendments after the reveal, or an acknowledgement to train unread.

    The reading page exports exactly this."""

    model_config = ConfigDict(extra="forbid")  # a misspelled field is an error, not silently dropped

    report_id: str
    reviewer: str = Field(description="Who read: a person's, an agent's or a program's name.")
    reviewer_kind: ReviewerKind = "human"
    labels: dict[int, dict[str, Label]] = Field(
        default_factory=dict,
        description="sample id -> {role: pass | fail | unsure} for each of the report's read_roles.",
    )
    amendments: list[AmendmentRequest] = Field(default_factory=list, description="After the reveal: misread labels.")
    accept_unread: bool = Field(
        default=False,
        description="Train on these rewards without a read: opens the gate as 'reward not reviewed', stamped on "
        "the recipe, the run's status, its metrics header and the model card. Needs accept_unread_reason; "
        "never clears a blocking flag.",
    )
    accept_unread_reason: str = Field(default="", description="Why the rewards are trained on unread.")
    notes: str = ""


class GateDecision(BaseModel):
    """Why training may start on these rewards: the inspection that opened the gate, and how it was reviewed."""

    inspection_id: str
    reviewed: bool = Field(description="False when the rewards were accepted unread (accept_unread).")
    stamp: str = Field(description="'reviewed: ...' or 'reward not reviewed: ...', stamped wherever the run shows.")
    reward_fingerprint: str


class SamplePage(BaseModel):
    """Some of an inspection's samples, in id order, as many as fit an agent's context at once. Until a sample
    carries blind labels it is shown blind: prompt, completion and reference columns, no score."""

    report_id: str
    blind: bool = Field(description="True while the scores are hidden (the read has not labelled these yet).")
    samples: list[SampleResult]
    offset: int = Field(description="Position of the first sample shown among all of the report's samples.")
    samples_total: int
    next_offset: int | None = Field(description="Send it as offset for the next page; None after the last one.")


class InspectionDigest(BaseModel):
    """An inspection as an agent reads it: the verdict, what needs attention, and the first page of samples.

    The whole report (every sample and probe) is the resource ``grpo://inspections/{id}``.
    """

    id: str
    verdict: Literal["pending", "passed", "failed", "accepted_unread"]
    verdict_reasons: list[str] = Field(default_factory=list)
    summary: str = Field(description="One paragraph: samples, rewards, blocking flags, hacked probes, what to do.")
    rewards: list[str] = Field(description="Each reward as 'name (role, weight)'.")
    stats: dict[str, RewardStats]
    flags: list[Flag]
    hacked_probes: list[ProbeResult] = Field(description="Only the probes that beat a reward; the rest passed.")
    probes_run: int
    read_roles: list[str] = Field(description="The roles you label each sample for, blind: pass, fail or unsure.")
    draw: str = Field(description="How the samples to read were drawn.")
    page: SamplePage = Field(description="The first samples to label; fetch the rest with inspection_samples.")
    report_uri: str = Field(description="The whole report as Markdown (resource).")
    paths: dict[str, str] = Field(default_factory=dict, description="The stored report and its Markdown / HTML.")


class ReviewOutcome(BaseModel):
    """What record_review decided: the verdict and why, the reveal, without repeating the report."""

    report_id: str
    verdict: Literal["pending", "passed", "failed", "accepted_unread"]
    verdict_reasons: list[str]
    labelled: int = Field(description="Samples with a blind label for every read role.")
    samples_total: int
    disagreements: list[Disagreement] = Field(
        default_factory=list, description="After the reveal: each sample where a reward and your label differ."
    )
    agreement: list[Agreement] = Field(
        default_factory=list, description="Each reward against your first labels given blind."
    )
    stamp: str = Field(
        description="What a run on these rewards shows ('reviewed: ...' or 'reward not reviewed: ...'); empty "
        "when the gate stays shut."
    )
