#include "echo/alternatives.h"

namespace echo {
namespace {

bool quantizes(const AllReduceSpec& spec, const TraceInfo& trace) {
  return trace.count > spec.exact_max_count;
}
bool exact(const AllReduceSpec& spec, const TraceInfo& trace) { return !quantizes(spec, trace); }
bool compensates(const AllReduceSpec& spec) { return spec.compensator.mode != CompensatorMode::kOff; }
// Compensator 'deficit' runs with units 'stream', residual 'local' and gains 'sum' only: the
// alternatives that change those do not apply to it.
bool deficit(const AllReduceSpec& spec) { return spec.compensator.mode == CompensatorMode::kDeficit; }
// A forward trace with post-norm sites: the only calls whose units change any bit.
bool post_norm_forward(const AllReduceSpec& s, const TraceInfo& t) {
  return compensates(s) && s.direction == Direction::kForward && t.post_norm && *t.post_norm == "rmsnorm";
}
AllReduceSpec same(AllReduceSpec spec) { return spec; }

const std::vector<Alternative> kAlternatives = {
    {"scale-rounded-to-nearest",
     "quantizer scales rounded to the nearest fp16 value instead of up (round_up_fp16)",
     "numerics.md 1 (round_up_fp16) and 2.2 step 2 / 2.3",
     [](const AllReduceSpec& s, const TraceInfo& t) { return quantizes(s, t); }, same,
     Alteration::kScaleRoundedToNearest, false},
    {"ranks-summed-in-reverse",
     "the owner (or exact-path) sum taken from rank P-1 down to rank 0 instead of in rank order",
     "numerics.md 4, step 2 (Reduce) and the exact path",
     // Two terms commute in fp32; the ring has an order of its own.
     [](const AllReduceSpec& s, const TraceInfo& t) {
       return t.ranks >= 3 && (s.algorithm == Algorithm::kOwner || exact(s, t));
     },
     same, Alteration::kRanksSummedInReverse, false},
    {"compensator-not-reset",
     "the compensator state carried from one pass into the next instead of reset to zero",
     "numerics.md 6, first paragraph (state zero at the start of each pass)",
     [](const AllReduceSpec& s, const TraceInfo& t) { return compensates(s) && t.passes >= 2; }, same,
     Alteration::kNone, true},
    {"exact-path-missing",
     "messages of at most exact_max_count elements quantized instead of summed exactly",
     "numerics.md 4, Exact path (small messages)",
     [](const AllReduceSpec& s, const TraceInfo& t) { return exact(s, t); },
     [](AllReduceSpec s) {
       s.exact_max_count = 0;
       return s;
     },
     Alteration::kNone, false},
    {"exact-path-taken",
     "the exact small-message path taken for a message longer than exact_max_count",
     "numerics.md 4, Exact path (small messages)",
     [](const AllReduceSpec& s, const TraceInfo& t) { return quantizes(s, t); },
     [](AllReduceSpec s) {
       s.exact_max_count = static_cast<std::size_t>(-1);
       return s;
     },
     Alteration::kNone, false},
    {"naive-instead-of-zero-aware",
     "the zero-aware blend replaced by the naive quantizer (anchors at the group's min and max, "
     "zero-point never rounded)",
     "numerics.md 2.2 step 1 (zero-aware anchors and snap)",
     [](const AllReduceSpec& s, const TraceInfo& t) {
       return s.quant.kind == QuantizerKind::kZeroAware && quantizes(s, t);
     },
     [](AllReduceSpec s) {
       s.quant.kind = QuantizerKind::kNaive;
       return s;
     },
     Alteration::kNone, false},
    {"residual-mode-swapped",
     "the compensator fed the other residual (global u = x' - y/P against local rounding errors)",
     "numerics.md 6, Residual",
     [](const AllReduceSpec& s, const TraceInfo&) {
       return compensates(s) && !deficit(s) && s.algorithm == Algorithm::kOwner;
     },
     [](AllReduceSpec s) {
       s.compensator.residual = s.compensator.residual == ResidualMode::kGlobal ? ResidualMode::kLocal
                                                                               : ResidualMode::kGlobal;
       return s;
     },
     Alteration::kNone, false},
    {"stream-units-ignored",
     "compensator units 'stream' ignored: the state carried in the sites' own units (no per-row gains)",
     "numerics.md 6.1, steps 4 and 5",
     [](const AllReduceSpec& s, const TraceInfo& t) {
       return s.compensator.units == CompensatorUnits::kStream && !deficit(s) && post_norm_forward(s, t);
     },
     [](AllReduceSpec s) {
       s.compensator.units = CompensatorUnits::kSite;
       s.compensator.profile = CompensatorProfile::kFlat;  // both act in units 'stream' only
       s.compensator.clip = 0.0f;
       s.compensator.gains = CompensatorGains::kOwn;
       return s;
     },
     Alteration::kNone, false},
    {"stream-profile-ignored",
     "compensator profile 'sqrt' ignored: one stream gain per row (no per-feature factors)",
     "numerics.md 6.1, step 6",
     [](const AllReduceSpec& s, const TraceInfo& t) {
       return s.compensator.profile != CompensatorProfile::kFlat && post_norm_forward(s, t);
     },
     [](AllReduceSpec s) {
       s.compensator.profile = CompensatorProfile::kFlat;
       return s;
     },
     Alteration::kNone, false},
    {"stream-clip-ignored",
     "the compensator clip ignored: corrections not clamped to clip times their row's RMS",
     "numerics.md 6.1, step 7",
     [](const AllReduceSpec& s, const TraceInfo& t) {
       return s.compensator.clip > 0.0f && post_norm_forward(s, t);
     },
     [](AllReduceSpec s) {
       s.compensator.clip = 0.0f;
       return s;
     },
     Alteration::kNone, false},
    {"stream-gains-ignored",
     "compensator gains 'sum' taken as 'own': the update and the apply at the rank's own row RMS",
     "numerics.md 6.1, step 8",
     [](const AllReduceSpec& s, const TraceInfo& t) {
       return s.compensator.gains == CompensatorGains::kSum && !deficit(s) && post_norm_forward(s, t);
     },
     [](AllReduceSpec s) {
       s.compensator.gains = CompensatorGains::kOwn;
       return s;
     },
     Alteration::kNone, false},
    {"deficit-correction-not-subtracted",
     "compensator 'deficit' updated with the residual u instead of u - c: the correction applied not "
     "subtracted, the loop left open",
     "numerics.md 6.2, Update",
     [](const AllReduceSpec& s, const TraceInfo& t) { return deficit(s) && post_norm_forward(s, t); }, same,
     Alteration::kDeficitCorrectionNotSubtracted, false},
    {"stream-units-applied",
     "per-row stream gains applied although the spec's compensator units are 'site'",
     "numerics.md 6 and 6.1 (units 'site' is the paper's compensator)",
     [](const AllReduceSpec& s, const TraceInfo& t) {
       return s.compensator.units == CompensatorUnits::kSite && post_norm_forward(s, t);
     },
     [](AllReduceSpec s) {
       s.compensator.units = CompensatorUnits::kStream;
       return s;
     },
     Alteration::kNone, false},
};

class AlternativeBackend final : public AllReduceBackend {
 public:
  AlternativeBackend(const Alternative& alternative, const AllReduceSpec& spec, int ranks)
      : alternative_(alternative), spec_(alternative.spec_of(spec)), ranks_(ranks), states_(ranks) {}
  const char* name() const override { return alternative_.name; }
  void start_pass() override {
    if (alternative_.keeps_state_across_passes && started_) return;
    started_ = true;
    for (CompensatorState& s : states_) s.reset();
  }
  Status run(std::size_t count, const float* const* inputs, float* const* outputs,
             float* const* compensated, AllReduceReport* report, const SiteInfo* site) override {
    return allreduce_altered(alternative_.alteration, spec_, ranks_, count, inputs, outputs,
                             states_.data(), compensated, report, &workspace_, site);
  }

 private:
  const Alternative& alternative_;
  AllReduceSpec spec_;
  int ranks_;
  std::vector<CompensatorState> states_;
  bool started_ = false;
  AllReduceWorkspace workspace_;
};

}  // namespace

const std::vector<Alternative>& alternatives() { return kAlternatives; }

const Alternative* find_alternative(std::string_view name) {
  for (const Alternative& a : kAlternatives) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

std::unique_ptr<AllReduceBackend> make_alternative_backend(const Alternative& alternative,
                                                           const AllReduceSpec& spec, int ranks) {
  return std::make_unique<AlternativeBackend>(alternative, spec, ranks);
}

}  // namespace echo
