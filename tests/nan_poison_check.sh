#!/usr/bin/env bash
# Negative control of tests/support/compare.h: with GGTRAIN_TEST_POISON_COMPARE=1
# the helper turns one element of every compared array NaN, so each test below
# must FAIL, and fail on the NaN ("non-finite value" in its output). A test
# that passes under poison compares numbers some way that cannot see NaN.
#
# usage: nan_poison_check.sh BUILD_DIR/tests
#
# The list is every test that uses the helper (about a minute in all, most of
# it ModelFd.LoraOnEveryTarget's finite differences). Not listed: Compare.*,
# the helper's own tests, which poisoning is meant to break.
set -u

if [[ $# -ne 1 || ! -d $1 ]]; then
  echo "usage: $0 BUILD_DIR/tests" >&2
  exit 2
fi
bin_dir=$1

# "binary test" — every test here compares numbers through compare.h.
tests=(
  "ggtrain_reference_tests Reference.EveryReferenceStateMatches"
  "ggtrain_reference_tests Reference.LlamaCppLogitsOnFixtureModel"
  "ggtrain_engine_tests LayerFd.Linear"
  "ggtrain_engine_tests LayerFd.RmsNorm"
  "ggtrain_engine_tests LayerFd.Rope"
  "ggtrain_engine_tests LayerFd.AttentionMultiHead"
  "ggtrain_engine_tests LayerFd.AttentionGroupedQuery"
  "ggtrain_engine_tests LayerFd.AttentionMultiQuery"
  "ggtrain_engine_tests LayerFd.AttentionKeyBlocksNarrowerThanTiles"
  "ggtrain_engine_tests LayerFd.AttentionOneTile"
  "ggtrain_engine_tests LayerFd.AttentionWithinDocuments"
  "ggtrain_engine_tests LayerFd.PackedDocumentsEqualEachDocumentAlone"
  "ggtrain_engine_tests LayerFd.ReferenceAttention"
  "ggtrain_engine_tests LayerFd.FlashAttentionMatchesReferenceInFloat"
  "ggtrain_engine_tests LayerFd.SwiGlu"
  "ggtrain_engine_tests LayerFd.GeGlu"
  "ggtrain_engine_tests LayerFd.FloatGeGluMatchesDouble"
  "ggtrain_engine_tests LayerFd.Embedding"
  "ggtrain_engine_tests LayerFd.CrossEntropy"
  "ggtrain_engine_tests LayerFd.CrossEntropyFusedMatchesForwardThenBackward"
  "ggtrain_engine_tests LayerFd.VectorExpMatchesLibm"
  "ggtrain_engine_tests LayerFd.FloatSwiGluAndRmsNormMatchDouble"
  "ggtrain_engine_tests LayerFd.ResidualRmsNormEqualsAddThenNorm"
  "ggtrain_engine_tests ModelFd.PackedDocumentsAndMaskedTargets"
  "ggtrain_engine_tests ModelFd.PackedWindowEqualsExamplesAlone"
  "ggtrain_engine_tests ModelFd.GroupedQueryUntied"
  "ggtrain_engine_tests ModelFd.MultiHeadTied"
  "ggtrain_engine_tests ModelFd.MultiQueryTied"
  "ggtrain_engine_tests ModelFd.Qwen3HeadNormsNeoxRopeWideHeads"
  "ggtrain_engine_tests ModelFd.Qwen2BiasesNeoxRope"
  "ggtrain_engine_tests ModelFd.Gemma3SlidingWindowPostNormsGeglu"
  "ggtrain_engine_tests ModelFd.LoraOnEveryTarget"
  "ggtrain_engine_tests ModelFd.DonorLens"
  "ggtrain_engine_tests Training.GradientAccumulationEqualsOneBigBatch"
  "ggtrain_engine_tests ModelOptions.RecomputeChunksAndTilesGiveTheSameGradients"
  "ggtrain_engine_tests ModelOptions.RecomputeWithLora"
  "ggtrain_engine_tests ModelOptions.FloatRecomputeMatchesStoredActivations"
  "ggtrain_infer_tests Decoder.MatchesTrainingForwardGqaUntied"
  "ggtrain_infer_tests Decoder.MatchesTrainingForwardMqaTied"
  "ggtrain_infer_tests Decoder.MatchesTrainingForwardQwen3"
  "ggtrain_infer_tests Decoder.MatchesTrainingForwardQwen2"
  "ggtrain_infer_tests Decoder.MatchesTrainingForwardGemma3"
  "ggtrain_infer_tests Decoder.MatchesTrainingForwardWithLlama3RopeFactors"
  "ggtrain_run_tests ChatRun.LossIsTheMeanOverTheStepsAnswerTokens"
  "ggtrain_infer_tests Decoder.Fp16CacheBatchAndStepsAgreeAndFollowFp32"
  "ggtrain_infer_tests Cases/AttentionDecode.EqualsDoubleSoftmaxOverTheCachedKeys/2"
  "ggtrain_infer_tests Cases/AttentionDecode.EqualsDoubleSoftmaxOverTheCachedKeys/8"
  "ggtrain_import_tests Import.LogitsEqualThePerHeadModelGqa"
  "ggtrain_import_tests Import.LogitsEqualThePerHeadModelMha"
  "ggtrain_import_tests Import.LogitsEqualThePerHeadModelMqaTied"
  "ggtrain_import_tests Import.LogitsEqualThePerHeadModelWithLens"
  "ggtrain_run_tests Donor.FoldedModelHasTheTrainingTimeLogits"
  "ggtrain_run_tests Lora.InitialAdapterIsTheBaseModel"
  "ggtrain_run_tests Lora.RunWritesAdaptersThatTheDecoderAndMergeReproduce"
  "ggtrain_run_tests Types/HeldBase.ComputesTheDequantizedModel/Q8_0"
  "ggtrain_run_tests Types/HeldBase.ComputesTheDequantizedModel/Q4_K"
  "ggtrain_run_tests Bf16.GemmMatchesFloatGemmOnRoundedInputs"
  "ggtrain_run_tests Bf16.TileGemmMatchesFloatOnRoundedInputs"
  "ggtrain_run_tests Bf16.AttentionFollowsFloatAttention"
  "ggtrain_run_tests Bf16.ModelLogitsAndGradientsFollowFp32"
  "ggtrain_run_tests Bf16.TinyLossCurveWithin2PercentOfFp32"
)

# How test $2 ended in gtest output file $1: nan (failed, and its output
# names a non-finite value), other (failed on something else), passed, missing.
# A parameterised test's FAILED line carries ", where GetParam() = ...".
outcome_of() {
  awk -v t="$2" '
    $0 == "[ RUN      ] " t { inside = 1; ran = 1; next }
    inside && /non-finite value/ { nan = 1 }
    inside && (index($0, "[  FAILED  ] " t " (") == 1 || index($0, "[  FAILED  ] " t ", where") == 1) {
      failed = 1; inside = 0
    }
    inside && index($0, "[       OK ] " t " (") == 1 { inside = 0 }
    END { print !ran ? "missing" : !failed ? "passed" : nan ? "nan" : "other" }
  ' "$1"
}

declare -A filter
for entry in "${tests[@]}"; do
  read -r bin name <<<"$entry"
  filter[$bin]+="${filter[$bin]:+:}$name"
done

log_dir=$(mktemp -d)
trap 'rm -rf "$log_dir"' EXIT
status=0
for bin in "${!filter[@]}"; do
  if [[ ! -x $bin_dir/$bin ]]; then
    echo "MISSING BINARY $bin_dir/$bin"
    status=1
    continue
  fi
  GGTRAIN_TEST_POISON_COMPARE=1 "$bin_dir/$bin" --gtest_filter="${filter[$bin]}" >"$log_dir/$bin.log" 2>&1
done

for entry in "${tests[@]}"; do
  read -r bin name <<<"$entry"
  [[ -f $log_dir/$bin.log ]] || continue
  case $(outcome_of "$log_dir/$bin.log" "$name") in
    nan) echo "ok: $name fails on the injected NaN" ;;
    other) echo "NOT ON NaN: $name failed, but its output names no non-finite value"; status=1 ;;
    passed) echo "BLIND TO NaN: $name passed with a NaN injected into its comparison"; status=1 ;;
    missing) echo "NOT RUN: $name is not in $bin"; status=1 ;;
  esac
done
if [[ $status -ne 0 ]]; then
  echo "nan_poison_check: some tests did not fail on the injected NaN; gtest summaries:"
  for f in "$log_dir"/*.log; do echo "=== $f"; grep -E '^\[  (FAILED|PASSED)|^\[       OK' "$f"; done
fi
exit $status
