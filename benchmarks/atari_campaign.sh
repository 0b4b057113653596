#!/usr/bin/env bash
# The runs behind docs/benchmarks.md's Breakout (section 4) and MinAtar (section 5) tables, in two lanes, one per CPU
# core. Every run is resumable and a finished one is skipped, so after an interruption (a session's end) the same
# command carries on where it stopped:
#
#     bash benchmarks/atari_campaign.sh            # both lanes in the background, logs in benchmarks/results/tmp/
#     bash benchmarks/atari_campaign.sh --status   # which runs are finished
#     bash benchmarks/atari_campaign.sh --lane 1   # one lane only (1 or 2), e.g. on a one-core share
#     bash benchmarks/atari_campaign.sh --carry    # before a checkout is thrown away: see below
#     bash benchmarks/atari_campaign.sh --uncarry  # carried tuning runs (MinAtar and Breakout) back to their work
#                                                  # folders, before resuming them by hand with their own commands
#
# A 1M-step Breakout run takes longer than a working session, and results/tmp/ is not committed. `--carry` copies the
# latest checkpoint, the evaluation curve and the TensorBoard logs of every unfinished Breakout run to
# benchmarks/results/in_progress/ (committed: about 30 MB per run); a run started in a new checkout begins from there.
# Unfinished MinAtar runs that have passed a checkpoint (every 250k steps) are carried too: their checkpoint and curve
# (a few MB), to in_progress/learning/, and those of the tuning (benchmarks.minatar_tuning) to
# in_progress/minatar_tuning/<configuration>/learning/; Breakout tuning runs (--results-dir
# benchmarks/results/breakout_tuning/<name>) to in_progress/breakout_tuning/<name>/breakout/. A finished run's carried
# copy is deleted (commit the deletion with its result).
#
# Lane 1: the MinAtar sweep (TRPOPlus and PPO; the five games; seeds 1, then 2, then 3; 2M steps, about 27 min a run
#         with the tuned entry; a finished run is skipped), then ALE Breakout TRPOPlus `atari` entry seeds 2, 3 and 4.
#         Seeds 4 and 5 of the MinAtar sweep were added on 2026-11-25 at 15:15 UTC, after seeds 1-3 were reported
#         (SpaceInvaders, 3 points below PPO's interval, swings by 50 points between evaluations): every game, both
#         algorithms (MinAtar Breakout's seed 4 exists already, from the learning benchmark's seeds 0-4: 18 new runs).
#         The report's MINATAR_SEEDS becomes 1-5 once all of them are finished, whatever they score (all finished on
#         2026-11-25 at 20:02 UTC: the report is on seeds 1-5).
# Lane 2: ALE Breakout, 1M steps each (1.5-2 h a run): PPO `atari` entry seed 2 (seeds 0 and 1 exist), then
#         TRPOPlus `atari` entry seeds 0 and 1, then PPO seeds 3 and 4. (Seed 3 of both entries was added once seeds
#         0-2 were under way, for a fourth pair: the issue asks for at least three; every finished seed is reported.
#         Seed 4 of both was added on 2026-11-25, after seeds 0-3 were reported, for a fifth pair: both entries get
#         it, whatever it scores it is reported, and the report counts only the seeds that both entries finished.)
# Then (both lanes, once the runs above are finished) the Breakout tuning candidate O, seed 100 on lane 1 and 101 on
# lane 2 (breakout_tuning/O500/decision_rule.md; about 1 h a run; both finished on 2026-11-25, D stays: skipped),
# then candidate P the same way (breakout_tuning/P500/decision_rule.md, registered 2026-11-25 19:06 UTC; both finished,
# D stays), then Q (Q500/decision_rule.md, registered 2026-11-25 19:41 UTC; both finished, 1.195x: D stays), then Q
# and the entry D on tuning seeds 102 and 103 (Q500/decision_rule_4_seeds.md, registered 2026-11-25 20:08 UTC): Q and
# D seed 102 on lane 1, seed 103 on lane 2; then R (R500/decision_rule.md, registered 2026-11-25 21:25 UTC) on seeds
# 100 and 102 (lane 1) and 101 and 103 (lane 2) (all finished; D stays); then S and T (S500/decision_rule.md,
# registered 2026-11-25 22:07 UTC) the same way, then U (U500/decision_rule.md, registered 2026-11-25 22:19 UTC),
# then V and W (V500/decision_rule.md, registered 2026-11-26 00:24 UTC), then PPO's atari entry on the tuning seeds
# (PPO500/decision_rule.md, registered 2026-11-26 01:12 UTC: a reference, it decides nothing already run), then Y
# (X500/decision_rule.md, registered 2026-11-26 03:18 UTC; its runs on the lent machine stopped at about 240k, so they
# run again here, seeds 100 and 102 on lane 1, 101 and 103 on lane 2), then AA (AA500/decision_rule.md, registered
# 2026-11-26 04:05 UTC; stopped at 200k, its rule's addendum says why: its lanes are now AB's), then AB
# (AB500/decision_rule.md, registered 2026-11-26 04:38 UTC) the same way, then X and Z (X500/decision_rule.md: their
# lent-machine runs stopped at about 250k, so they run again here) the same way; AE (AC500/decision_rule.md, registered
# 2026-11-26 06:13 UTC, selected by its screen on the lent machine) goes before Z, seeds 100 and 102 on lane 1, 101 and
# 103 on lane 2. AE qualified and became the atari entry (2026-11-26 07:30 UTC); D's reported runs moved to
# benchmarks/results/breakout_variants/D/, so the lanes' TRPOPlus runs above (seeds 0-4, 1M steps) run the new entry:
# seeds 0-4 all finished on 2026-11-26 (1 and 3 resumed from checkpoints carried at 250k). Z was stopped at 250k and
# left out of the lanes: its rule judged it against D, which is no longer the entry.
# When a run finishes, commit its result: git add benchmarks/results/breakout benchmarks/results/learning
# and regenerate the report: python -m benchmarks.report
set -u
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
LOGS=benchmarks/results/tmp/campaign
MINATAR_GAMES=(MinAtar/Asterix-v1 MinAtar/Breakout-v1 MinAtar/Freeway-v1 MinAtar/Seaquest-v1 MinAtar/SpaceInvaders-v1)

CARRY=benchmarks/results/in_progress

breakout() {  # algo seed
    local result=benchmarks/results/breakout/$1/seed$2.json
    local run=benchmarks/results/tmp/breakout/$1/seed$2 carried=$CARRY/breakout/$1/seed$2
    if [ -f "$result" ]; then echo "done: $result"; rm -rf "$carried"; return; fi
    if [ -d "$carried" ] && ! compgen -G "$run/checkpoints/*.zip" > /dev/null; then
        echo "starting from the carried checkpoint $carried"
        mkdir -p "$run" && cp -r "$carried"/. "$run"/
    fi
    OMP_NUM_THREADS=1 "$PYTHON" -m benchmarks.breakout --algo "$1" --budget 1e6 --seed "$2" --threads 1 \
        --checkpoint-freq 50000 --resume && rm -rf "$carried"
}

# Breakout tuning candidate O (breakout_tuning/O500/decision_rule.md, registered 2026-11-25 before its runs): the
# atari entry with EntropyTargetCallback, 500k steps, tuning seeds 100 and 101
O_PARAMS=(ent_coef_decay:1.0 min_ent_coef:0.0 "callback:[{sb3_trpo_plus.callbacks.AdaptiveTrustRegionCallback: \
{ls_fail_threshold: 20, max_kl_decay: 0.8, min_max_kl: 0.005, damping_growth: 1.2, max_damping: 0.2}}, \
{sb3_trpo_plus.callbacks.EntropyTargetCallback: {target_entropy: 0.85, adaptation_rate: 0.05, min_ent_coef: 0.005, \
max_ent_coef: 0.05}}]")

# Breakout tuning candidate P (breakout_tuning/P500/decision_rule.md, registered 2026-11-25 before its runs): the CNN
# shared and trained by the critic alone, the trust-region step on the actor's head
P_PARAMS=("policy_kwargs:dict(share_features_extractor=True)" critic_kl_fraction:0.5 target_kl:0.04 \
actor_trains_features:False cg_sub_sampling_factor:1)
# Candidate Q (breakout_tuning/Q500/decision_rule.md): P with PPO's entropy bonus (0.01, no decay)
Q_PARAMS=("${P_PARAMS[@]}" ent_coef:0.01 ent_coef_decay:1.0 min_ent_coef:0.01)
# Candidate R (R500/decision_rule.md, registered 2026-11-25 21:25 UTC): Q with a hidden layer of 256 units of the
# actor's own between the shared features and the logits
R_PARAMS=("policy_kwargs:dict(share_features_extractor=True, net_arch=dict(pi=[256], vf=[]))" \
critic_kl_fraction:0.5 target_kl:0.04 actor_trains_features:False cg_sub_sampling_factor:1 \
ent_coef:0.01 ent_coef_decay:1.0 min_ent_coef:0.01)
# Candidates S and T (S500/decision_rule.md, registered 2026-11-25 22:07 UTC): R with twice the critic's KL for the CNN
S_PARAMS=("${R_PARAMS[@]/critic_kl_fraction:0.5/critic_kl_fraction:0.67}")
S_PARAMS=("${S_PARAMS[@]/target_kl:0.04/target_kl:0.06}")
T_PARAMS=("${R_PARAMS[@]/target_kl:0.04/target_kl:0.08}")
# Candidate U (U500/decision_rule.md, registered 2026-11-25 22:19 UTC): R with actor_refit_steps 2
U_PARAMS=("${R_PARAMS[@]}" actor_refit_steps:2)
# Candidates V and W (V500/decision_rule.md, registered 2026-11-26 00:24 UTC): T with 8 x 128 rollouts (V), T with the
# actor's step at least 0.12 and the critic's change of the CNN still within 0.04 (W). Their eight runs were started
# by hand, all at once, with the commands of the rule; the lanes below resume them one by one.
V_PARAMS=("${T_PARAMS[@]}" n_steps:128)
W_PARAMS=("${T_PARAMS[@]/target_kl:0.08/target_kl:0.16}")
W_PARAMS=("${W_PARAMS[@]/critic_kl_fraction:0.5/critic_kl_fraction:0.25}")
# Candidates X, Y and Z (X500/decision_rule.md, registered 2026-11-26 03:18 UTC): T with a fixed entropy bonus of 0.03
# (X), with three epochs of the critic per rollout (Y), with both (Z). Y's runs first (the rule's addendum says why),
# X's and Z's after AB's.
X_PARAMS=("${T_PARAMS[@]/ent_coef:0.01/ent_coef:0.03}")
X_PARAMS=("${X_PARAMS[@]/min_ent_coef:0.01/min_ent_coef:0.03}")
Y_PARAMS=("${T_PARAMS[@]}" n_critic_updates:3)
Z_PARAMS=("${X_PARAMS[@]}" n_critic_updates:3)
# Candidate AA (AA500/decision_rule.md, registered 2026-11-26 04:05 UTC): T with the policy's objective in the
# critic's loss (critic_policy_coef 1.0), which then trains the CNN as PPO's combined loss does
AA_PARAMS=("${T_PARAMS[@]}" critic_policy_coef:1.0)
# Candidate AB (AB500/decision_rule.md, registered 2026-11-26 04:38 UTC): AA with the weight 0.03
AB_PARAMS=("${T_PARAMS[@]}" critic_policy_coef:0.03)
# Candidates AC, AD and AE (AC500/decision_rule.md, registered 2026-11-26 06:13 UTC): T with the policy's objective in
# the critic's loss clipped as PPO clips it (AC), with PPO's four epochs at 2.5e-4 (AD), and the critic's share of the
# trust region raised to 0.75 (AE). Screened at 200k-230k on the lent machine; AE runs to 500k here
AC_PARAMS=("${T_PARAMS[@]}" critic_policy_coef:2.0 critic_policy_clip_range:0.1)
AD_PARAMS=("${AC_PARAMS[@]}" n_critic_updates:4 learning_rate:2.5e-4)
AE_PARAMS=("${AD_PARAMS[@]/critic_kl_fraction:0.5/critic_kl_fraction:0.75}")
# The entry D itself, on tuning seeds (the flags of its runs on seeds 100 and 101: the entry's own values)
D_PARAMS=(n_steps:256 ent_coef_decay:0.999)

breakout_tuning() {  # name seed params...: one 500k-step tuning run, resumed from its carried checkpoint if any
    local name=$1 seed=$2 base=benchmarks/results/breakout_tuning/$1 algo=trpo_plus
    shift 2
    [ "$name" = PPO500 ] && algo=ppo  # PPO's atari entry on the tuning seeds, for reference (no --params)
    if [ -f "$base/breakout/$algo/seed$seed.json" ]; then echo "done: $base seed $seed"; return; fi
    uncarry breakout "$CARRY/breakout_tuning/$name/breakout/$algo/seed$seed"
    OMP_NUM_THREADS=1 "$PYTHON" -m benchmarks.breakout --algo "$algo" --seed "$seed" --budget 5e5 --eval-freq 50000 \
        --threads 1 --checkpoint-freq 50000 --results-dir "$base" --resume --params "$@" \
        && rm -rf "$CARRY/breakout_tuning/$name/breakout/$algo/seed$seed"
}

carry() {  # the latest checkpoint, curve and TensorBoard logs of every unfinished Breakout run -> $CARRY
    local run carried
    for run in benchmarks/results/tmp/breakout/*/seed* benchmarks/results/breakout_tuning/*/tmp/breakout/*/seed*; do
        [ -d "$run" ] || continue
        carried=$(carried_of "$run" breakout)
        if [ -f "$(result_of "$run" breakout)" ] || ! compgen -G "$run/checkpoints/*.zip" > /dev/null; then continue; fi
        rm -rf "$carried" && mkdir -p "$carried"
        cp -r "$run/checkpoints" "$run/tensorboard" "$carried"/
        [ -f "$run/curve.json" ] && cp "$run/curve.json" "$carried"/
        echo "carried $run ($(ls "$carried/checkpoints" | grep zip)) -> $carried ($(du -sh "$carried" | cut -f1))"
    done
    for run in benchmarks/results/tmp/learning/*/MinAtar-*/seed* benchmarks/results/minatar_tuning/*/tmp/learning/*/MinAtar-*/seed*; do
        [ -d "$run" ] || continue
        carried=$(carried_of "$run" learning)
        if [ -f "$(result_of "$run" learning)" ] || ! compgen -G "$run/checkpoints/*.zip" > /dev/null; then continue; fi
        rm -rf "$carried" && mkdir -p "$carried"
        cp -r "$run/checkpoints" "$carried"/
        [ -f "$run/curve.json" ] && cp "$run/curve.json" "$carried"/
        echo "carried $run ($(ls "$carried/checkpoints" | grep zip)) -> $carried ($(du -sh "$carried" | cut -f1))"
    done
}

# A run's folders (KIND: learning for MinAtar, breakout for ALE Breakout): its work folder <base>/tmp/KIND/<key> (base:
# benchmarks/results, or a tuning configuration's benchmarks/results/minatar_tuning/<name> or breakout_tuning/<name>),
# its result <base>/KIND/<key>.json and its carried copy $CARRY[/<tuning>/<name>]/KIND/<key>
result_of() { local base=${1%%/tmp/$2/*}; echo "$base/$2/${1#*/tmp/$2/}.json"; }
carried_of() { local base=${1%%/tmp/$2/*}; echo "$CARRY${base#benchmarks/results}/$2/${1#*/tmp/$2/}"; }

uncarry_minatar() {  # carried MinAtar runs (sweep and tuning) -> their work folders; finished ones deleted
    uncarry learning $CARRY/learning/*/MinAtar-*/seed* $CARRY/minatar_tuning/*/learning/*/MinAtar-*/seed*
}

uncarry() {  # KIND carried...: carried runs -> their work folders (where the scripts resume them); finished ones deleted
    local kind=$1 carried base run
    shift
    for carried in "$@"; do
        [ -d "$carried" ] || continue
        base=benchmarks/results${carried#$CARRY}; base=${base%%/$kind/*}
        run=$base/tmp/$kind/${carried#*/$kind/}
        if [ -f "$(result_of "$run" "$kind")" ]; then rm -rf "$carried"; continue; fi
        if ! compgen -G "$run/checkpoints/*.zip" > /dev/null; then
            echo "starting from the carried checkpoint $carried"
            mkdir -p "$run" && cp -r "$carried"/. "$run"/
        fi
    done
}

minatar() {  # learning.py skips the finished (algo, env, seed) keys; seed by seed, so every game has a pair early
    uncarry_minatar
    for seed in 1 2 3 4 5; do
        OMP_NUM_THREADS=1 "$PYTHON" -m benchmarks.learning --algos trpo_plus ppo --envs "${MINATAR_GAMES[@]}" \
            --seeds "$seed" --jobs 1 --threads 1 || return
        uncarry_minatar  # (deletes the carried copies of the runs just finished)
    done
}

if [ "${1:-}" = "--uncarry" ]; then
    uncarry_minatar
    uncarry breakout $CARRY/breakout_tuning/*/breakout/*/seed*
    exit 0
fi

if [ "${1:-}" = "--carry" ]; then
    carry
    echo "commit it: git add -A $CARRY benchmarks/results/breakout benchmarks/results/learning benchmarks/results/minatar_tuning"
    exit 0
fi

if [ "${1:-}" = "--status" ]; then
    for algo_seed in "trpo_plus 0" "trpo_plus 1" "trpo_plus 2" "trpo_plus 3" "trpo_plus 4" "ppo 0" "ppo 1" "ppo 2" "ppo 3" "ppo 4"; do
        set -- $algo_seed
        file=benchmarks/results/breakout/$1/seed$2.json
        [ -f "$file" ] && echo "finished  $file" || echo "to run    $file$([ -d "$CARRY/breakout/$1/seed$2" ] && echo " (carried: $(ls "$CARRY/breakout/$1/seed$2/checkpoints" | grep zip))")"
    done
    "$PYTHON" -m benchmarks.learning --algos trpo_plus ppo --envs "${MINATAR_GAMES[@]}" --seeds 1 2 3 4 5 --dry-run \
        | grep -v "^would run"
    for carried in $CARRY/learning/*/MinAtar-*/seed*; do
        [ -d "$carried" ] && echo "carried   $carried ($(ls "$carried/checkpoints" | grep zip))"
    done
    exit 0
fi

lane1() {
    minatar && breakout trpo_plus 2 && breakout trpo_plus 3 && breakout trpo_plus 4 \
        && breakout_tuning O500 100 "${O_PARAMS[@]}" && breakout_tuning P500 100 "${P_PARAMS[@]}" \
        && breakout_tuning Q500 100 "${Q_PARAMS[@]}" && breakout_tuning Q500 102 "${Q_PARAMS[@]}" \
        && breakout_tuning D 102 "${D_PARAMS[@]}" && breakout_tuning R500 100 "${R_PARAMS[@]}" \
        && breakout_tuning R500 102 "${R_PARAMS[@]}" && breakout_tuning S500 100 "${S_PARAMS[@]}" \
        && breakout_tuning T500 100 "${T_PARAMS[@]}" && breakout_tuning S500 102 "${S_PARAMS[@]}" \
        && breakout_tuning T500 102 "${T_PARAMS[@]}" && breakout_tuning U500 100 "${U_PARAMS[@]}" \
        && breakout_tuning U500 102 "${U_PARAMS[@]}" && breakout_tuning V500 100 "${V_PARAMS[@]}" \
        && breakout_tuning W500 100 "${W_PARAMS[@]}" && breakout_tuning V500 102 "${V_PARAMS[@]}" \
        && breakout_tuning W500 102 "${W_PARAMS[@]}" && breakout_tuning PPO500 100 && breakout_tuning PPO500 102 \
        && breakout_tuning Y500 100 "${Y_PARAMS[@]}" && breakout_tuning Y500 102 "${Y_PARAMS[@]}" \
        && breakout_tuning AB500 100 "${AB_PARAMS[@]}" && breakout_tuning AB500 102 "${AB_PARAMS[@]}" \
        && breakout_tuning X500 100 "${X_PARAMS[@]}" && breakout_tuning X500 102 "${X_PARAMS[@]}" \
        && breakout_tuning AE500 100 "${AE_PARAMS[@]}" && breakout_tuning AE500 102 "${AE_PARAMS[@]}"
}
lane2() {
    breakout ppo 1 && breakout ppo 2 && breakout trpo_plus 0 && breakout trpo_plus 1 && breakout ppo 3 \
        && breakout ppo 4 && breakout_tuning O500 101 "${O_PARAMS[@]}" && breakout_tuning P500 101 "${P_PARAMS[@]}" \
        && breakout_tuning Q500 101 "${Q_PARAMS[@]}" && breakout_tuning Q500 103 "${Q_PARAMS[@]}" \
        && breakout_tuning D 103 "${D_PARAMS[@]}" && breakout_tuning R500 101 "${R_PARAMS[@]}" \
        && breakout_tuning R500 103 "${R_PARAMS[@]}" && breakout_tuning S500 101 "${S_PARAMS[@]}" \
        && breakout_tuning T500 101 "${T_PARAMS[@]}" && breakout_tuning S500 103 "${S_PARAMS[@]}" \
        && breakout_tuning T500 103 "${T_PARAMS[@]}" && breakout_tuning U500 101 "${U_PARAMS[@]}" \
        && breakout_tuning U500 103 "${U_PARAMS[@]}" && breakout_tuning V500 101 "${V_PARAMS[@]}" \
        && breakout_tuning W500 101 "${W_PARAMS[@]}" && breakout_tuning V500 103 "${V_PARAMS[@]}" \
        && breakout_tuning W500 103 "${W_PARAMS[@]}" && breakout_tuning PPO500 101 && breakout_tuning PPO500 103 \
        && breakout_tuning Y500 101 "${Y_PARAMS[@]}" && breakout_tuning Y500 103 "${Y_PARAMS[@]}" \
        && breakout_tuning AB500 101 "${AB_PARAMS[@]}" && breakout_tuning AB500 103 "${AB_PARAMS[@]}" \
        && breakout_tuning X500 101 "${X_PARAMS[@]}" && breakout_tuning X500 103 "${X_PARAMS[@]}" \
        && breakout_tuning AE500 101 "${AE_PARAMS[@]}" && breakout_tuning AE500 103 "${AE_PARAMS[@]}"
}

mkdir -p "$LOGS"
if [ "${1:-}" = "--lane" ]; then
    "lane$2" >> "$LOGS/lane$2.log" 2>&1 &
else
    lane1 >> "$LOGS/lane1.log" 2>&1 &
    lane2 >> "$LOGS/lane2.log" 2>&1 &
fi
echo "lanes started (pids $(jobs -p | tr '\n' ' ')); logs in $LOGS/"
wait
