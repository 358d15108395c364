// SPDX-License-Identifier: Apache-2.0
// archguard check FILE... --cc 9.0 | --fleet nodes.csv: what the driver will do with each
// file's device code on that GPU (runs natively / after a JIT / fails with 209, 222, 223).
#include "cli.hpp"
#include "verb_inputs.hpp"

#include "common/driver_env.hpp"
#include "common/parallel.hpp"
#include "common/version.hpp"

#include <archguard/device.hpp>
#include <archguard/doctor.hpp>
#include <archguard/fleet.hpp>

#include "common/fs.hpp"
#include "common/record.hpp"

#include <archguard/cache.hpp>
#include <archguard/container.hpp>

#include <cctype>
#include <cstdarg>
#include <set>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <fstream>
#include <future>
#include <memory>
#include <sstream>

extern char** environ;

namespace archguard::cli {
namespace {

/// What this run printed, kept while its answer may be stored (see AnswerKey): stdout's bytes
/// and the notes printed last on stderr.
struct Printed {
  bool keep = false;
  std::string out, err;
};
Printed g_printed;

/// printf to stdout, also kept in g_printed.
[[gnu::format(printf, 1, 2)]] void say(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::va_list again;
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, again);
  va_end(again);
  if (n > 0) {
    std::string text(static_cast<std::size_t>(n) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), format, args);
    text.pop_back();
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (g_printed.keep) g_printed.out += text;
  }
  va_end(args);
}

struct CheckOptions {
  std::vector<std::string> files;
  ReadLimits limits;
  std::string cc;
  std::string driver;
  std::string fleet;
  bool tegra = false;
  bool force_ptx_jit = false;
  bool disable_ptx_jit = false;
  bool from_env = false;
  bool json = false;
  bool no_kernels = false;
  bool no_deps = false;
  bool no_cache = false;
};

struct Gpu {
  std::string name;
  Device device;
  std::size_t count = 1;
  std::optional<DriverVersion> driver;  ///< a fleet report's node group: its driver (else the --driver one)
  std::optional<Version2> driver_cuda;
  std::vector<std::string> nodes;  ///< a fleet report's node group: its nodes
};

Result<Version2> parse_cc(std::string_view text) {
  if (auto cc = common::parse_cc(text)) {  // "9.0"
    warn_unknown_cc(*cc);
    return *cc;
  }
  auto targets = parse_token(text);  // "90", "sm_90": the capability of that architecture
  if (targets && !targets->empty()) {
    warn_inferred(*targets);
    return cc_of_sm(targets->front().arch.sm);
  }
  return Error{ErrorKind::usage, "--cc '" + std::string(text) + "' is not a compute capability such as 9.0"};
}

std::string error_name(int code) {
  switch (code) {
    case kErrNoKernelImage:
      return "209 (no kernel image is available for execution on the device)";
    case kErrUnsupportedPtx:
      return "222 (the provided PTX was compiled with an unsupported toolchain)";
    case kErrJitDisabled:
      return "223 (PTX JIT compilation was disabled)";
    case kErrSymbolNotFound:
      return "500 (named symbol not found)";
    default:
      return std::to_string(code);
  }
}

/// The images the running units use, for "runs natively (sm_90)".
std::string used_images(const ObjectVerdict& v, Outcome outcome) {
  std::vector<std::string> used;
  for (const auto& u : v.units) {
    if (u.verdict.outcome != outcome || !u.verdict.image || *u.verdict.image >= u.images.size()) continue;
    std::string n = image_name(u.images[*u.verdict.image]);
    if (std::find(used.begin(), used.end(), n) == used.end()) used.push_back(n);
  }
  std::string list;
  for (const auto& n : used) list += (list.empty() ? "" : ", ") + n;
  return list;
}

std::string count_text(std::size_t n, std::string_view what) {
  return std::to_string(n) + " " + std::string(what) + (n == 1 ? "" : "s");
}

std::string units_text(const ObjectJudgement& j) {
  const auto units = j.failing_units();
  std::string out;
  for (std::size_t i = 0; i < units.size() && i < 3; ++i) out += (i == 0 ? "" : ", ") + units[i];
  if (units.size() > 3) out += " and " + std::to_string(units.size() - 3) + " more";
  return out;
}

/// The verdict line of one object: its tier, in words.
std::string summary_text(const ObjectVerdict& v, const ObjectJudgement& j) {
  if (!v.has_device_code()) return "no device code";
  const std::size_t kernels = j.native + j.jit + j.failed;
  switch (j.tier) {
    case Tier::no_device_code:
      return "no device code";
    case Tier::no_kernels:
      return "defines no kernel (" + count_text(j.units, "fatbin") + "): nothing can fail";
    case Tier::none_run: {
      // 222: there is PTX, only too new for the driver; 209: nothing for this GPU at all.
      std::string s = "fails with " + error_name(j.cuda_error) +
                      (j.cuda_error == kErrUnsupportedPtx ? ": no kernel has SASS for this GPU, and their PTX is newer than the driver accepts"
                                                          : ": no kernel has an image for this GPU");
      if (j.failed > 0) s += " (" + count_text(j.failed, "kernel") + " in " + units_text(j) + ")";
      return s;
    }
    case Tier::some_missing:
      return "some kernels have no image for this GPU: " + std::to_string(j.failed) + " of " + count_text(kernels, "kernel") +
             " fail with " + error_name(j.cuda_error) + " if launched (in " + units_text(j) + ")";
    case Tier::all_run:
    case Tier::other_gpus:
      break;
  }
  std::string s;
  if (j.kernels_listed ? j.native == 0 : v.outcome == Outcome::jit)
    s = "runs after a JIT of " + used_images(v, Outcome::jit) + " (first-launch delay)";
  else if (j.kernels_listed && j.jit > 0)  // some kernels only: say how many
    s = "runs natively (" + used_images(v, Outcome::native) + "); " + std::to_string(j.jit) + " of " + count_text(kernels, "kernel") +
        " after a JIT of " + used_images(v, Outcome::jit) + " (first-launch delay)";
  else
    s = "runs natively (" + used_images(v, Outcome::native) + ")";
  if (j.tier == Tier::other_gpus)
    s += "; " + std::to_string(j.failed) + " of " + count_text(kernels, "kernel") +
         " are built for other GPUs only and not launched here (" + j.dispatch_evidence + ")";
  return s;
}

/// The visible GPUs, grouped by model, for `check` without --cc: what this machine would run on.
Result<std::vector<Gpu>> visible_gpus() {
  auto drv = device::Driver::shared();
  if (!drv) return rewrap(drv.error(), "no GPU visible here (" + drv.message() + ")");
  auto list = (*drv)->devices();
  if (!list) return rewrap(list.error(), "no GPU visible here (" + list.message() + ")");
  if (list->empty()) return Error{ErrorKind::driver, "no GPU visible here (the driver lists none)"};
  std::vector<Gpu> out;
  for (const auto& d : *list) {
    auto same = std::find_if(out.begin(), out.end(), [&](const Gpu& g) { return g.name == d.name && g.device.cc == d.cc; });
    if (same != out.end()) {
      ++same->count;
      continue;
    }
    Gpu g{d.name, device_for_cc(d.cc), 1, std::nullopt, std::nullopt, {}};
    g.device.tegra = d.integrated;
    out.push_back(g);
  }
  return out;
}

/// The installed driver: /proc/driver/nvidia/version, else the oldest driver of the CUDA
/// release the driver reports (a lower bound, enough to bound the PTX ISA it accepts).
std::optional<DriverVersion> installed_driver() {
  std::ifstream f("/proc/driver/nvidia/version");
  if (f) {
    std::stringstream ss;
    ss << f.rdbuf();
    if (auto v = doctor::parse_proc_driver_version(ss.str())) return v;
  }
  auto drv = device::Driver::shared();
  if (!drv) return std::nullopt;
  auto cuda = (*drv)->cuda_version();
  if (!cuda) return std::nullopt;
  if (const ReleaseRow* row = find_release(*cuda); row != nullptr && *row->min_driver != '\0') {
    if (auto v = parse_driver_version(row->min_driver)) return *v;
  }
  return std::nullopt;
}

/// What a JIT verdict assumes of a driver nobody named: the driver that accepts the newest PTX
/// ISA the object's JIT images use (empty when the verdict needs no JIT).
std::string driver_assumption(const ObjectVerdict& v) {
  if (v.outcome != Outcome::jit) return "";
  Version2 isa{};
  for (const auto& u : v.units)
    if (u.verdict.outcome == Outcome::jit && u.verdict.image && *u.verdict.image < u.images.size())
      isa = std::max(isa, u.images[*u.verdict.image].ptx_isa);
  if (isa.empty()) return "";
  const std::string need = min_driver_for_ptx_isa(isa);
  if (need.empty()) {
    for (const ReleaseRow& row : release_rows())  // ascending: the release that introduced it
      if (row.ptx_isa >= isa)
        return "ptx isa " + version_text(isa) + " needs the driver of cuda " + version_text(row.cuda) +
               " or later (its version is not in archguard's table); give --driver to check";
    return "ptx isa " + version_text(isa) + " is newer than any cuda release archguard knows: it needs a driver at " +
           "least as new as the toolkit that wrote it; give --driver to check";
  }
  return "assumes driver >= " + need + " (ptx isa " + version_text(isa) + "); give --driver to check";
}

std::string device_text(const Gpu& g) {
  std::string s = g.name.empty() ? std::string("CC ") + version_text(g.device.cc) : g.name + " (CC " + version_text(g.device.cc);
  if (g.device.tegra) s += g.name.empty() ? " tegra" : ", tegra";
  if (!g.name.empty()) {
    s += ", " + std::to_string(g.count) + (g.count == 1 ? " GPU" : " GPUs");
    if (!g.nodes.empty()) s += " on " + fleet::node_list(g.nodes);
    if (g.driver) s += ", driver " + format_driver_version(*g.driver);
    else if (g.driver_cuda) s += ", driver for CUDA " + version_text(*g.driver_cuda);
    else if (!g.nodes.empty()) s += ", driver unknown";
    s += ")";
  }
  return s;
}

/// The verdict of one judged object on one GPU, and its place in its package.
struct ObjectResult {
  const ObjectFatbins* object = nullptr;
  std::size_t members = 0;  ///< archive members merged into it (a static library)
  ObjectVerdict verdict;
  ObjectJudgement judgement;
  Variance variance = Variance::none;
  bool excused = false;  ///< a problem of the object that its package explains
};

struct InputResult {
  std::vector<ObjectResult> objects;
  bool package = false;  ///< judged as a unit (a directory, a wheel, an archive of libraries)
  PackageVerdict verdict;
  bool problem = false;
};

/// Whether an input is judged as a unit of several objects (docs/verdicts.md, "Packages"): a
/// directory or an archive (a wheel, a tarball) whose members hold device code. An ELF file named
/// directly, with the libraries it loads, is judged object by object.
bool is_package(const ScanReport& r) {
  if (r.directory) return true;
  return std::any_of(r.objects.begin(), r.objects.end(), [](const ObjectFatbins& o) { return !o.archive.empty() && o.loaded_by.empty(); });
}

/// Resolves --cc or --fleet into the GPUs to judge (this machine's: visible_gpus); prints the
/// usage error itself.
std::optional<std::vector<Gpu>> resolve_gpus(const CheckOptions& opt) {
  std::vector<Gpu> gpus;
  if (!opt.cc.empty()) {
    auto cc = parse_cc(opt.cc);
    if (!cc) {
      std::fprintf(stderr, "archguard check: %s\n", cc.message().c_str());
      return std::nullopt;
    }
    Gpu g;
    g.device = device_for_cc(*cc);
    g.device.tegra = g.device.tegra || opt.tegra;
    gpus.push_back(g);
    return gpus;
  }
  auto text = common::read_file(opt.fleet, true);
  if (!text) {
    std::fprintf(stderr, "archguard check: --fleet: %s\n", shown(text.message()).c_str());
    return std::nullopt;
  }
  if (fleet::looks_like_json(*text)) {
    // A fleet report (archguard fleet merge --report) or node reports: judged per node group,
    // each with its own driver.
    fleet::Fleet f;
    fleet::read_reports(*text, opt.fleet, f);
    fleet::finish(f);
    for (const auto& p : f.problems)
      std::fprintf(stderr, "archguard check: --fleet: %s: %s\n", shown(p.where).c_str(), shown(p.message).c_str());
    for (const auto& gr : fleet::groups(f)) {
      gpus.push_back(Gpu{gr.gpu, Device{gr.cc, gr.tegra || opt.tegra}, gr.gpus, gr.driver, gr.driver_cuda, gr.nodes});
    }
    if (gpus.empty()) {
      std::fprintf(stderr, "archguard check: --fleet: %s holds no node with a GPU\n", shown(opt.fleet).c_str());
      return std::nullopt;
    }
    return gpus;
  }
  auto models = parse_fleet_csv(*text, opt.fleet);
  if (!models) {
    std::fprintf(stderr, "archguard check: %s\n", shown(models.message()).c_str());
    return std::nullopt;
  }
  for (const auto& m : *models) {
    Gpu g{m.name, device_for_cc(m.cc), m.count, std::nullopt, std::nullopt, {}};
    g.device.tegra = g.device.tegra || opt.tegra;
    gpus.push_back(g);
  }
  return gpus;
}

/// --no-kernels: fatbins only (the old, coarse reading), nothing decoded.
ObjectJudgement coarse_judgement(const ObjectFatbins& o, const ObjectVerdict& v) {
  ObjectJudgement j;
  j.object = o.path;
  j.kind = object_kind(o);
  j.units = v.units.size();
  j.cuda_error = v.cuda_error;
  j.tier = !v.has_device_code()         ? Tier::no_device_code
           : v.outcome != Outcome::fail ? Tier::all_run
           : std::all_of(v.units.begin(), v.units.end(), [](const UnitVerdict& u) { return u.verdict.outcome == Outcome::fail; })
               ? Tier::none_run
               : Tier::some_missing;
  return j;
}

/// ARCHGUARD_TIMES=1: where a run's time went, on stderr at the end (never part of an answer):
/// the read, the judging with its longest object and the last object's start, the report.
struct RunTimes {
  using Clock = std::chrono::steady_clock;
  static bool wanted() {
    const char* v = std::getenv("ARCHGUARD_TIMES");
    return v != nullptr && *v != '\0' && std::string_view(v) != "0";
  }
  static double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  Clock::time_point start = Clock::now();
  double read = 0, judge = 0, report = 0;
  std::size_t objects = 0;
  unsigned threads = 0;
  double longest = 0, last_start = 0;  // seconds: one object's judging, the last object's start (from the judging's)
  std::string longest_object;
  void print() const {
    std::fprintf(stderr,
                 "archguard: times: read %.3f s, judge %.3f s (%zu objects on %u threads; longest %.3f s: %s; last started at "
                 "%.3f s), report %.3f s, total %.3f s\n",
                 read, judge, objects, threads, longest, shown(longest_object).c_str(), last_start, report, since(start));
  }
};

/// The verdict and judgement of every object of every input on every GPU: [input][gpu][object].
/// The objects are judged in parallel; each object's images are decoded once (or found in the
/// results cache) and shared by the GPUs, and dropped when the object is done; an object judged
/// by an earlier run on the same GPU is read from its record (judge_with_store).
using Judgements = std::vector<std::vector<std::vector<ObjectResult>>>;
Judgements judge_everything(const std::vector<std::vector<JudgedObject>>& judged, const std::vector<bool>& wanted,
                            const std::vector<Gpu>& gpus, const std::vector<DriverSettings>& settings, const CheckOptions& opt,
                            const PayloadPages& pages, const DerivedLimits& limits, RunTimes* times = nullptr) {
  Judgements out(judged.size());
  std::vector<std::pair<std::size_t, std::size_t>> work;  // (input, object)
  for (std::size_t ri = 0; ri < judged.size(); ++ri) {
    out[ri].assign(gpus.size(), std::vector<ObjectResult>(wanted[ri] ? judged[ri].size() : 0));
    if (wanted[ri])
      for (std::size_t oi = 0; oi < judged[ri].size(); ++oi) work.emplace_back(ri, oi);
  }
  FactsStore* store = opt.no_kernels ? nullptr : results_cache(opt.no_cache);
  {
    std::vector<const ObjectFatbins*> objects;
    for (const auto& [ri, oi] : work) objects.push_back(&judged[ri][oi].get());
    std::vector<std::pair<std::size_t, std::size_t>> sorted;
    for (const std::size_t w : most_work_first(objects)) sorted.push_back(work[w]);
    work = std::move(sorted);
  }
  const unsigned threads = common::thread_count(opt.limits.threads);
  const DecodeBudget::Raised room(judging_decode_bytes(threads));     // the threads must not wait for one another
  const DecodeScratchKept kept(judging_scratch_kept_bytes(threads));  // nor map and fault in buffers image after image
  const RunTimes::Clock::time_point began = RunTimes::Clock::now();
  std::vector<std::pair<double, double>> spans(times != nullptr ? work.size() : 0);  // (start, seconds) per object
  common::parallel_for(work.size(), threads, [&](std::size_t w) {
    const RunTimes::Clock::time_point t0 = RunTimes::Clock::now();
    const auto [ri, oi] = work[w];
    const ObjectFatbins& o = judged[ri][oi].get();
    KernelIndex index(store, o, limits);
    index.set_threads(threads);  // a large object's images on every core, not on this thread alone
    index.set_release([&pages](Bytes payload) { pages.release(payload); });
    for (std::size_t gi = 0; gi < gpus.size(); ++gi) {
      ObjectResult& res = out[ri][gi][oi];
      res.object = &o;
      res.members = judged[ri][oi].members;
      if (opt.no_kernels) {
        res.verdict = check_object(o, gpus[gi].device, settings[gi]);
        res.judgement = coarse_judgement(o, res.verdict);
      }
      // A fatbin without an image for this GPU: whether any kernel fails is known only from the
      // kernel lists (the fatbin may define none, as cuFFTW's stub; its kernels may be in a
      // fatbin that runs too, as those of libtorch_cuda's sm_100-only embedded fatbins, or be
      // named for another GPU). Judged by fatbins alone such an object would fail a working
      // install: it is judged in full.
      if (!opt.no_kernels || (res.judgement.tier != Tier::all_run && res.judgement.tier != Tier::no_device_code)) {
        auto both = judge_with_store(o, gpus[gi].device, settings[gi], opt.json, index);
        res.verdict = std::move(both.verdict);
        res.judgement = std::move(both.judgement);
      }
    }
    pages.release(o);  // judged: its payloads' pages leave the process
    if (times != nullptr)
      spans[w] = {std::chrono::duration<double>(t0 - began).count(), RunTimes::since(t0)};
  });
  if (times != nullptr) {
    times->objects = work.size();
    times->threads = threads;
    for (std::size_t w = 0; w < work.size(); ++w) {
      times->last_start = std::max(times->last_start, spans[w].first);
      if (spans[w].second > times->longest) {
        times->longest = spans[w].second;
        times->longest_object = judged[work[w].first][work[w].second].get().path;
      }
    }
  }
  return out;
}

/// Every object of one input on one GPU (judged by judge_everything), and the input's verdict
/// as a unit.
InputResult judge_input(const ScanReport& r, std::vector<ObjectResult> objects, const Gpu& g) {
  InputResult in;
  in.objects = std::move(objects);
  in.package = is_package(r);
  if (in.package) {
    std::vector<PackageMember> members;
    for (const ObjectResult& res : in.objects)
      members.push_back(package_member(*res.object, res.judgement));
    in.verdict = judge_package(members, g.device);
    for (std::size_t i = 0; i < in.objects.size(); ++i) {
      in.objects[i].variance = in.verdict.variance[i];
      in.objects[i].excused = in.verdict.excused[i];
    }
    in.problem = in.verdict.problem;
  } else {
    in.problem = std::any_of(in.objects.begin(), in.objects.end(), [](const ObjectResult& o) { return is_problem(o.judgement.tier); });
  }
  return in;
}

nlohmann::json object_json(const ObjectResult& res, const std::string& summary, const std::string& assumption) {
  const ObjectVerdict& v = res.verdict;
  const ObjectJudgement& j = res.judgement;
  nlohmann::json units = nlohmann::json::array();
  for (const auto& u : v.units) {
    nlohmann::json images = nlohmann::json::array();
    for (const auto& im : u.images) images.push_back(image_json(im));
    units.push_back({{"fatbin", u.fatbin},
                     {"section", to_string(u.section)},
                     {"identifier", u.identifier},
                     {"translation_unit", u.translation_unit},
                     {"verdict", verdict_json(u.verdict, u.images)},
                     {"images", std::move(images)}});
  }
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& k : j.kernels)
    kernels.push_back({{"name", k.kernel.name},
                       {"demangled", k.kernel.demangled},
                       {"fatbin", k.fatbin},
                       {"translation_unit", k.translation_unit},
                       {"outcome", outcome_text(k.verdict.outcome)},
                       {"cuda_error", k.verdict.cuda_error},
                       {"arch_tag", k.arch_tag},
                       {"other_gpus", k.other_gpus},
                       {"absent_from_image", k.absent_from_image},
                       {"link_drop", k.link_drop}});
  nlohmann::json without = nlohmann::json::array();
  for (const KernelVerdict* k : j.failing())
    without.push_back({{"fatbin", k->fatbin}, {"name", k->kernel.name}, {"demangled", k->kernel.demangled}});
  nlohmann::json oj{{"object", res.object->path},
                    {"kind", to_string(j.kind)},
                    {"members", res.members},
                    {"device_code", v.has_device_code()},
                    {"tier", to_string(j.tier)},
                    {"problem", is_problem(j.tier)},
                    {"variance", res.variance == Variance::variant ? "variant" : res.variance == Variance::specific ? "specific"
                                                                             : res.variance == Variance::newer      ? "newer"
                                                                                                                    : "none"},
                    {"excused", res.excused},
                    {"outcome", outcome_text(v.outcome)},
                    {"cuda_error", v.outcome == Outcome::fail ? v.cuda_error : 0},
                    {"summary", summary},
                    {"counts",
                     {{"fatbins", j.units},
                      {"kernel_fatbins", j.kernel_units},
                      {"image_sets", j.arch_sets},
                      {"kernels", j.native + j.jit + j.failed},
                      {"native", j.native},
                      {"jit", j.jit},
                      {"failed", j.failed},
                      {"failed_tagged", j.failed_tagged},
                      {"link_drops", j.link_drops},
                      {"absent_from_image", j.absent}}},
                    {"kernels_listed", j.kernels_listed},
                    {"dispatch_evidence", j.dispatch_evidence},
                    {"loaded_by", res.object->loaded_by},
                    {"driver_assumption", assumption},
                    {"units", std::move(units)},
                    {"kernels", std::move(kernels)},
                    {"kernels_without_image", std::move(without)}};
  if (!j.errors.empty()) oj["kernel_error"] = j.errors.front();
  return oj;
}

/// The detail lines of one object: per fatbin where they help, the failing kernels per unit.
void object_details(const ObjectResult& res, std::vector<std::string>& details) {
  const ObjectVerdict& v = res.verdict;
  const ObjectJudgement& j = res.judgement;
  const std::string& path = res.object->path;
  const bool problem = is_problem(j.tier) && !res.excused;
  if (res.excused) {  // its package explains it: one line, not its kernels
    details.push_back("  " + path + ": " + count_text(j.failed, "kernel") + " without an image here, " +
                      (res.variance == Variance::variant ? "a variant: another one serves this GPU"
                       : res.variance == Variance::newer ? "built for newer GPUs only"
                                                         : "built for particular GPUs only"));
    return;
  }
  if (problem || v.units.size() <= 8) {
    // Units with the same verdict on the same images are one line: a vendor library has
    // thousands of fatbins that fail alike (--json lists every one).
    struct Same {
      std::string text;  // ": fail 209: <reason> [images: ...]"
      std::string tu;
      std::vector<std::string> fatbins;  // "fatbin 3 (id)"
    };
    std::vector<Same> lines;
    for (const auto& u : v.units) {
      std::string text = ": " + std::string(outcome_text(u.verdict.outcome));
      if (u.verdict.outcome == Outcome::fail) text += " " + std::to_string(u.verdict.cuda_error);
      text += ": " + u.verdict.reason + " [images:";
      for (const auto& im : u.images) text += " " + image_name(im) + (im.relocatable ? "(rel)" : "");
      text += "]";
      std::string fatbin = "fatbin " + std::to_string(u.fatbin);
      if (!u.identifier.empty()) fatbin += " (" + u.identifier + ")";
      auto it = std::find_if(lines.begin(), lines.end(), [&](const Same& l) { return l.text == text && l.tu == u.translation_unit; });
      if (it == lines.end()) lines.push_back({std::move(text), u.translation_unit, {std::move(fatbin)}});
      else it->fatbins.push_back(std::move(fatbin));
    }
    constexpr std::size_t kLinesShown = 20;
    for (std::size_t i = 0; i < lines.size() && i < kLinesShown; ++i) {
      const Same& l = lines[i];
      std::string which = l.fatbins[0];
      if (l.fatbins.size() == 2) which += " and " + l.fatbins[1];
      else if (l.fatbins.size() > 2) which = "fatbins " + l.fatbins[0].substr(7) + ", " + l.fatbins[1].substr(7) + " and " + std::to_string(l.fatbins.size() - 2) + " more";
      details.push_back("  " + path + ": " + (l.tu.empty() ? "" : l.tu + ", ") + which + l.text);
    }
    if (lines.size() > kLinesShown)
      details.push_back("  " + path + ": and " + std::to_string(lines.size() - kLinesShown) + " more verdicts of other fatbins (--json lists every one)");
  }
  const auto failing = j.failing();
  if (!failing.empty() && is_problem(j.tier)) {
    // Grouped by translation unit, so that a stale one is named with its kernels.
    // Bounded: a vendor library can lack thousands (--json lists every one).
    constexpr std::size_t kUnitsShown = 10, kKernelsShown = 10;
    const auto units = j.failing_units();
    for (std::size_t ui = 0; ui < units.size() && ui < kUnitsShown; ++ui) {
      const std::string& unit = units[ui];
      details.push_back("  " + path + ": kernels with no usable image in " + unit + ":");
      std::size_t shown_here = 0, more = 0;
      for (const KernelVerdict* k : failing) {
        if (unit_label(k->fatbin, k->translation_unit, k->identifier) != unit) continue;
        if (shown_here++ >= kKernelsShown) {
          ++more;
          continue;
        }
        std::string line = "    " + k->kernel.demangled;
        if (!k->link_drop.empty())
          line += ": device-link drop, fails with 500 (named symbol not found): " + k->link_drop +
                  "; build that -rdc object for every architecture the program is device-linked for (nvlink does not warn)";
        else if (!k->absent_from_image.empty())
          line += ": fails with 500 (named symbol not found): " + k->absent_from_image;
        details.push_back(std::move(line));
      }
      if (more > 0) details.push_back("    ... and " + count_text(more, "more kernel") + " (archguard check --json lists every one)");
    }
    if (units.size() > kUnitsShown)
      details.push_back("  " + path + ": ... and " + std::to_string(units.size() - kUnitsShown) +
                        " more translation units with kernels that have no usable image (archguard check --json lists them)");
  } else if (!failing.empty()) {
    std::string line = "  " + path + ": " + count_text(failing.size(), "kernel") + " for other GPUs only, e.g. ";
    for (std::size_t i = 0; i < failing.size() && i < 3; ++i) line += (i == 0 ? "" : ", ") + failing[i]->kernel.demangled;
    details.push_back(std::move(line));
  }
  for (const auto& e : j.errors) details.push_back("  " + path + ": kernels not listed: " + e);
}

/// What one GPU (a fleet's node group) does with every input: runs natively, by JIT, or fails.
struct GroupOutcome {
  bool fail = false;
  bool jit = false;
  bool native = false;
  std::set<int> errors;  ///< the CUDA errors of what fails

  void add(const InputResult& r) {
    if (r.problem) fail = true;
    for (const ObjectResult& o : r.objects) {
      if (!o.verdict.has_device_code()) continue;
      if (o.verdict.outcome == Outcome::jit) jit = true;
      if (o.verdict.outcome == Outcome::native) native = true;
      if (is_problem(o.judgement.tier) && !o.excused && o.judgement.cuda_error != 0) errors.insert(o.judgement.cuda_error);
    }
    if (r.package && r.problem && r.verdict.cuda_error != 0) errors.insert(r.verdict.cuda_error);
  }
  std::string text() const {
    if (!fail) return !jit ? "runs natively" : native ? "runs, partly after a JIT"
                                                      : "runs after a JIT";
    std::string s = "fails";
    for (int e : errors) s += (s == "fails" ? " with " : ", ") + std::to_string(e);
    return s;
  }
};

/// The targets that make the build cover every failing group: SASS for each failing CC (which
/// runs whatever PTX ISA the group's driver accepts), and PTX for the newest, so later GPUs JIT.
std::vector<Target> fleet_fix_targets(const std::vector<Gpu>& gpus, const std::vector<GroupOutcome>& outcomes) {
  std::set<unsigned> sms;
  for (std::size_t i = 0; i < gpus.size(); ++i)
    if (outcomes[i].fail) sms.insert(gpus[i].device.cc.packed());
  std::vector<Target> targets;
  for (unsigned sm : sms) targets.push_back(Target{Arch{sm, Suffix::none}, CodeKind::sass});
  if (!sms.empty()) targets.push_back(Target{Arch{*sms.rbegin(), Suffix::none}, CodeKind::ptx});
  return targets;
}

nlohmann::json fleet_json(const std::vector<Gpu>& gpus, const std::vector<GroupOutcome>& outcomes) {
  std::size_t groups_run = 0, nodes = 0, nodes_fail = 0;
  std::set<std::string> failing;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (!outcomes[i].fail) ++groups_run;
    else failing.insert(gpus[i].nodes.begin(), gpus[i].nodes.end());
  }
  std::set<std::string> all;
  for (const auto& g : gpus) all.insert(g.nodes.begin(), g.nodes.end());
  nodes = all.size();
  nodes_fail = failing.size();
  const auto targets = fleet_fix_targets(gpus, outcomes);
  nlohmann::json fix = nullptr;
  if (!targets.empty())
    fix = {{"cmake", format_targets(targets, Dialect::cmake)}, {"nvcc", format_targets(targets, Dialect::nvcc)}, {"torch", format_targets(targets, Dialect::torch)}};
  return {{"groups", gpus.size()}, {"groups_run", groups_run}, {"nodes", nodes}, {"nodes_run", nodes - nodes_fail}, {"failing_nodes", std::vector<std::string>(failing.begin(), failing.end())}, {"fix", fix}};
}

void print_fleet(const std::vector<Gpu>& gpus, const std::vector<GroupOutcome>& outcomes) {
  std::size_t groups_run = 0;
  std::set<std::string> all, failing;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    all.insert(gpus[i].nodes.begin(), gpus[i].nodes.end());
    if (!outcomes[i].fail) ++groups_run;
    else failing.insert(gpus[i].nodes.begin(), gpus[i].nodes.end());
  }
  std::string head = "fleet: runs on " + std::to_string(groups_run) + " of " + count_text(gpus.size(), "GPU group");
  if (!all.empty()) head += " (" + std::to_string(all.size() - failing.size()) + " of " + count_text(all.size(), "node") + ")";
  say("%s\n", head.c_str());
  for (std::size_t i = 0; i < gpus.size(); ++i)
    say("  %s: %s\n", shown(device_text(gpus[i])).c_str(), outcomes[i].text().c_str());
  const auto targets = fleet_fix_targets(gpus, outcomes);
  if (targets.empty()) return;
  say("to cover the whole fleet, add to the build's targets (what it has stays):\n");
  say("  CMake: \"%s\" in CMAKE_CUDA_ARCHITECTURES, or -DARCH_POLICY=fleet:<the fleet CSV of archguard fleet merge --csv-file>\n",
      format_targets(targets, Dialect::cmake).c_str());
  say("  nvcc: %s\n", format_targets(targets, Dialect::nvcc).c_str());
  for (std::size_t i = 0; i < gpus.size(); ++i)
    if (outcomes[i].errors.count(kErrUnsupportedPtx) != 0)
      say("  or, for %s: a driver that accepts the build's PTX (222: the PTX is newer than this driver's)\n",
          shown(gpus[i].nodes.empty() ? device_text(gpus[i]) : fleet::node_list(gpus[i].nodes)).c_str());
}

std::string environment_text(const DriverSettings& s) {
  std::string out;
  if (s.force_ptx_jit) out += "CUDA_FORCE_PTX_JIT=1";
  if (s.disable_ptx_jit) out += std::string(out.empty() ? "" : ", ") + "CUDA_DISABLE_PTX_JIT=1";
  return out.empty() ? "no CUDA_FORCE_PTX_JIT or CUDA_DISABLE_PTX_JIT" : out;
}

/// The driver and environment the verdicts assume: --driver (or this machine's), the JIT
/// switches given and (--from-env or this machine) those of the environment. Null after a
/// message when --driver does not parse.
std::optional<DriverSettings> check_settings(const CheckOptions& opt, bool this_machine) {
  DriverSettings settings;
  if (!opt.driver.empty()) {
    auto d = parse_driver_version(opt.driver);
    if (!d) {
      std::fprintf(stderr, "archguard check: --driver: %s\n", d.message().c_str());
      return std::nullopt;
    }
    settings.driver = *d;
  } else if (this_machine) {
    settings.driver = installed_driver();
  }
  settings.force_ptx_jit = opt.force_ptx_jit;
  settings.disable_ptx_jit = opt.disable_ptx_jit;
  if (opt.from_env || this_machine) {
    const common::DriverEnv env = common::read_driver_env();
    settings.force_ptx_jit = settings.force_ptx_jit || env.force_ptx_jit_on();
    settings.disable_ptx_jit = settings.disable_ptx_jit || env.disable_ptx_jit_on();
  }
  return settings;
}

void print_assumption(const std::vector<Gpu>& gpus, const DriverSettings& settings) {
  std::string line = "assuming this machine: ";
  for (std::size_t i = 0; i < gpus.size(); ++i) line += (i == 0 ? "" : ", ") + device_text(gpus[i]);
  line += settings.driver ? ", driver " + format_driver_version(*settings.driver) : ", driver version unknown";
  line += ", environment: " + environment_text(settings);
  say("%s\n", line.c_str());
}

/// A node group of a fleet report is judged with its own driver, unless --driver says otherwise.
std::vector<DriverSettings> group_settings(const std::vector<Gpu>& gpus, const DriverSettings& settings,
                                           const CheckOptions& opt) {
  std::vector<DriverSettings> gpu_settings;
  for (const Gpu& g : gpus) {
    DriverSettings gs = settings;
    if (opt.driver.empty() && (g.driver || g.driver_cuda)) {
      fleet::Node probe;
      probe.driver = g.driver;
      probe.driver_cuda = g.driver_cuda;
      gs.driver = fleet::effective_driver(probe);
    }
    gpu_settings.push_back(gs);
  }
  return gpu_settings;
}

/// An object's one-line verdict, with what a package excuses.
std::string object_summary(const ObjectResult& res) {
  std::string summary = summary_text(res.verdict, res.judgement);
  if (res.members > 0) summary += " (static library, " + count_text(res.members, "member") + " with device code)";
  if (res.excused)
    summary += "; not a problem for the package: " +
               std::string(res.variance == Variance::variant ? "a variant (another one serves this GPU)"
                           : res.variance == Variance::newer ? "built for newer GPUs only"
                                                             : "built for particular GPUs only");
  return summary;
}

/// What one GPU (or node group) collects over the inputs: its JSON, or the details printed last.
struct GpuReport {
  GroupOutcome outcome;
  nlohmann::json objects = nlohmann::json::array();
  nlohmann::json packages = nlohmann::json::array();
  std::vector<std::string> details;
};

/// One input judged on one GPU: its objects and, for a package, the package's verdict.
void check_input(const InputResult& result, const ScanReport& r, const Gpu& g, const DriverSettings& gs,
                 std::size_t gpu_count, const CheckOptions& opt, GpuReport& out) {
  const std::string lead = gpu_count > 1 ? "  " : "";
  const std::string on = gpu_count == 1 ? shown(" on " + device_text(g)) : "";
  for (const ObjectResult& res : result.objects) {
    std::string summary = object_summary(res);
    const std::string assumption = gs.driver ? "" : driver_assumption(res.verdict);
    if (opt.json) {
      out.objects.push_back(object_json(res, summary, assumption));
      continue;
    }
    // A loaded library is indented under the input that loads it and says who loads it.
    const std::string indent = lead + (res.object->loaded_by.empty() ? "" : "  ");
    const std::string who = res.object->loaded_by.empty() ? "" : " (loaded by " + res.object->loaded_by + ")";
    if (!assumption.empty()) summary += "; " + assumption;
    say("%s%s%s: %s%s\n", indent.c_str(), shown(res.object->path).c_str(), shown(who).c_str(), shown(summary).c_str(),
        on.c_str());
    object_details(res, out.details);
  }
  if (!result.package || result.verdict.objects < 2) return;
  if (opt.json) {
    out.packages.push_back({{"input", r.input},
                            {"problem", result.verdict.problem},
                            {"cuda_error", result.verdict.cuda_error},
                            {"summary", result.verdict.summary},
                            {"objects", result.verdict.objects},
                            {"run", result.verdict.run},
                            {"failing", result.verdict.failing},
                            {"groups", result.verdict.groups}});
    return;
  }
  say("%s%s: package %s%s\n", lead.c_str(), shown(r.input).c_str(), shown(result.verdict.summary).c_str(), on.c_str());
  for (const auto& line : result.verdict.groups) say("%s  %s\n", lead.c_str(), shown(line).c_str());
}

/// Every input on GPU `gi`; `any_fail` is set by a problem.
GpuReport check_gpu(std::size_t gi, const std::vector<Gpu>& gpus, const DriverSettings& gs, const Inputs& in,
                    Judgements& judgements, const CheckOptions& opt, bool& any_fail) {
  const Gpu& g = gpus[gi];
  const std::string lead = gpus.size() > 1 ? "  " : "";
  GpuReport out;
  if (!opt.json && gpus.size() > 1) say("%s\n", shown(device_text(g)).c_str());
  for (std::size_t ri = 0; ri < in.reports.size(); ++ri) {
    const ScanReport& r = in.reports[ri];
    const InputFacts& facts = in.facts[ri];
    if (!has_device_code(r) && !opt.json) say("%s%s\n", lead.c_str(), shown(no_device_code_line(facts)).c_str());
    if (!opt.json && gi == 0)
      for (const auto& n : dependency_notes(facts)) say("%s\n", shown(n).c_str());
    if (!opt.json && !has_device_code(r)) continue;  // said once above: "no device code (N files scanned)"
    const InputResult result = judge_input(r, std::move(judgements[ri][gi]), g);
    any_fail = any_fail || result.problem;
    out.outcome.add(result);
    check_input(result, r, g, gs, gpus.size(), opt, out);
  }
  if (!opt.json && !out.details.empty()) {
    say("%sdetails:\n", lead.c_str());
    for (const auto& d : out.details) say("%s%s\n", lead.c_str(), shown(d).c_str());
  }
  return out;
}

nlohmann::json device_json(const Gpu& g, const DriverSettings& gs, GpuReport& report) {
  return {{"name", g.name},
          {"cc", version_text(g.device.cc)},
          {"tegra", g.device.tegra},
          {"count", g.count},
          {"nodes", g.nodes},
          {"driver", gs.driver ? nlohmann::json(format_driver_version(*gs.driver)) : nlohmann::json(nullptr)},
          {"outcome", report.outcome.text()},
          {"objects", std::move(report.objects)},
          {"packages", std::move(report.packages)}};
}

nlohmann::json inputs_json(const Inputs& in) {
  nlohmann::json inputs = nlohmann::json::array();
  for (const auto& f : in.facts) {
    nlohmann::json missing = nlohmann::json::array();
    for (const auto& d : f.missing) missing.push_back({{"needed", d.needed}, {"loaded_by", d.loaded_by}});
    inputs.push_back({{"input", f.input},
                      {"files_scanned", f.files_scanned},
                      {"libraries", f.libraries},
                      {"libraries_not_found", std::move(missing)},
                      {"notes", f.notes},
                      {"skipped", f.skipped}});
  }
  return inputs;
}

/// The key of a whole answer of `check` in the results cache: a second run with the same
/// inputs, options, environment and GPUs prints what the first printed, reading nothing but
/// the directory walks. Usable only where everything the answer depends on goes into the key:
/// every input a directory (a file's answer would depend on the libraries it loads, found
/// through the environment, and its own records make it quick anyway), no --fleet file, every
/// file below with an identity (none changed in the last two seconds), no walk errors.
class AnswerKey {
 public:
  /// Whether a run with these inputs may be answered whole at all: a results cache, no
  /// --fleet, every input a directory (the walk may still find a reason not to).
  static bool possible(const CheckOptions& opt, const FactsStore* store) {
    return store != nullptr && opt.fleet.empty() && std::all_of(opt.files.begin(), opt.files.end(), [](const std::string& f) {
             std::error_code ec;
             return std::filesystem::is_directory(f, ec);
           });
  }
  AnswerKey(const CheckOptions& opt, FactsStore* store, unsigned threads) {
    if (!possible(opt, store)) return;
    auto add = [this](std::string_view tag, std::string_view value) {
      material_ += tag;
      material_ += '\0';
      material_ += std::to_string(value.size());
      material_ += '\0';
      material_ += value;
    };
    auto add_num = [this](std::uint64_t v) { material_.append(reinterpret_cast<const char*>(&v), sizeof v); };
    add("answer", "archguard check 1");
    std::error_code ec;
    add("cwd", std::filesystem::current_path(ec).string());
    for (const auto& f : opt.files) add("file", f);
    add("cc", opt.cc);
    add("driver", opt.driver);
    add("limits", opt.limits.max_inflated + '\0' + opt.limits.max_inflated_total + '\0' + opt.limits.max_ratio);
    for (const bool b : {opt.tegra, opt.force_ptx_jit, opt.disable_ptx_jit, opt.from_env, opt.json, opt.no_kernels, opt.no_deps})
      add_num(b ? 1 : 0);
    // Every variable of archguard's and CUDA's (limits, JIT switches, visible devices) but
    // those of the cache itself and the thread count, which change no output.
    std::vector<std::string> vars;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view v = *e;
      if (v.starts_with("ARCHGUARD_CACHE_") || v.starts_with("ARCHGUARD_RESULTS_CACHE_") || v.starts_with("ARCHGUARD_MAX_THREADS=") ||
          v.starts_with("ARCHGUARD_TIMES="))
        continue;
      if (v.starts_with("ARCHGUARD_") || v.starts_with("CUDA_")) vars.emplace_back(v);
    }
    std::sort(vars.begin(), vars.end());
    for (const auto& v : vars) add("env", v);
    // Walked here without keeping a copy for the read: a hit needs nothing more, a miss hands
    // each listing to the read (walks()).
    for (const auto& f : opt.files) {
      std::vector<std::string> errors, skipped;
      std::vector<ListedFile> files = list_files(f, threads, errors, nullptr, &skipped);
      if (!errors.empty()) return;
      for (const auto& k : skipped) add("skipped", k);
      for (const ListedFile& lf : files) {
        if (!lf.stamp) return;  // changed in the last seconds: it may be changing still
        add("path", lf.path);
        for (const std::uint64_t v : {std::uint64_t{lf.mode}, lf.stamp->dev, lf.stamp->ino, lf.stamp->size,
                                      static_cast<std::uint64_t>(lf.stamp->mtime_ns), static_cast<std::uint64_t>(lf.stamp->ctime_ns)})
          add_num(v);
        if (material_.size() >= kFlushAt) flush();
      }
      listings_.push_back(Listing{f, std::move(files), std::move(errors), std::move(skipped)});
    }
    flush();
    usable_ = true;
  }
  bool usable() const { return usable_; }
  /// The walks made, one per input, handed to the read (once).
  std::vector<SharedWalk*> walks() {
    std::vector<SharedWalk*> out;
    for (Listing& l : listings_) {
      walks_.push_back(std::make_unique<SharedWalk>(l.root, std::move(l.files), std::move(l.errors), std::move(l.skipped)));
      out.push_back(walks_.back().get());
    }
    listings_.clear();
    return out;
  }
  /// The key for this machine's GPUs as its identity stands for them (once: it finishes the hash).
  std::string key(const std::string& machine_identity) {
    jit::Hasher& h = *hasher_;
    h.add_field("machine", machine_identity);
    return jit::to_hex(h.finish());
  }
  /// The key, with the GPUs judged for and their driver settings (once: it finishes the hash).
  std::string key(const std::vector<Gpu>& gpus, const std::vector<DriverSettings>& settings) {
    jit::Hasher& h = *hasher_;
    for (std::size_t i = 0; i < gpus.size(); ++i) {
      const Gpu& g = gpus[i];
      h.add_field("gpu", device_text(g) + " cc " + version_text(g.device.cc) + (g.device.tegra ? " tegra" : ""));
      const DriverSettings& d = settings[i];
      h.add_field("settings", (d.driver ? format_driver_version(*d.driver) : std::string("unknown")) + (d.force_ptx_jit ? " force" : "") +
                                  (d.disable_ptx_jit ? " disable" : ""));
    }
    return jit::to_hex(h.finish());
  }

 private:
  struct Listing {
    std::string root;
    std::vector<ListedFile> files;
    std::vector<std::string> errors, skipped;
  };
  static constexpr std::size_t kFlushAt = std::size_t{1} << 16;
  /// The material gathered so far goes into the hash (in pieces: 76,660 paths make megabytes).
  void flush() {
    hasher_->add(material_);
    material_.clear();
  }
  bool usable_ = false;
  std::unique_ptr<jit::Hasher> hasher_ = std::make_unique<jit::Hasher>();
  std::string material_;
  std::vector<Listing> listings_;
  std::vector<std::unique_ptr<SharedWalk>> walks_;
};

/// An answer's record (common::Writer): the exit code, stdout's bytes, stderr's bytes.
std::vector<std::byte> encode_answer(int code, const Printed& printed) {
  common::Writer w;
  w.num(static_cast<std::uint64_t>(code));
  w.str(printed.out);
  w.str(printed.err);
  return std::move(w.out);
}

/// Decodes encode_answer's record; none when it is not one (a damaged record is judged anew).
std::optional<std::pair<int, Printed>> decode_answer(const std::vector<std::byte>& record) {
  common::Reader r{record};
  const std::uint64_t code = r.num();
  Printed p;
  p.out = r.str();
  p.err = r.str();
  if (!r.ok || r.at != record.size() || (code != kExitOk && code != kExitProblem)) return std::nullopt;
  return std::pair{static_cast<int>(code), std::move(p)};
}

int run_check(const CheckOptions& opt) {
  if (!opt.cc.empty() && !opt.fleet.empty()) {
    std::fprintf(stderr, "archguard check: give one of --cc and --fleet, not both\n");
    return kExitUsage;
  }
  // Without --cc or --fleet: this machine's GPUs, driver and environment (said in the output).
  const bool this_machine = opt.cc.empty() && opt.fleet.empty();
  // This machine's GPUs are asked for on another thread while the inputs are read: cuInit
  // takes 0.2 s on the H200 host and seconds on some nodes of many GPUs. Without a driver the
  // answer comes at once, and its error before any reading.
  std::future<Result<std::vector<Gpu>>> machine;
  std::optional<std::vector<Gpu>> resolved;
  auto machine_gpus = [&machine, &resolved]() {
    auto visible = machine.get();
    if (!visible) std::fprintf(stderr, "archguard check: %s; give --cc (e.g. --cc 9.0) or --fleet\n", visible.message().c_str());
    else resolved = std::move(*visible);
    return visible.ok();
  };
  auto start_machine = [&machine, &machine_gpus]() {
    machine = std::async(std::launch::async, visible_gpus);
    return machine.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready || machine_gpus();
  };
  if (!this_machine) {
    resolved = resolve_gpus(opt);
    if (!resolved) return kExitUsage;
  }
  if (!check_settings(opt, false)) return kExitUsage;  // --driver is checked before the reading

  ReadOptions read;
  read.deps = !opt.no_deps;
  auto scan = scan_options(opt.limits);
  if (!scan) {
    std::fprintf(stderr, "archguard check: %s\n", scan.message().c_str());
    return kExitUsage;
  }
  read.scan = *scan;
  read.scan.facts = results_cache(opt.no_cache);
  // Where a whole answer may be kept, this machine's identity (device::machine_identity: its
  // driver's files, PCI functions and device nodes) stands for its GPUs in the answer's key:
  // an answered run never starts the driver, and a run that is not starts it while it reads.
  // Without an identity the driver's GPUs go into the key, and a miss waits for them first.
  std::optional<std::string> identity;
  if (this_machine && AnswerKey::possible(opt, read.scan.facts)) identity = device::machine_identity();
  if (this_machine && !identity && !start_machine()) return kExitUsage;
  // A run answered whole by an earlier identical one (AnswerKey): the inputs are walked first
  // to make the key.
  AnswerKey answer(opt, read.scan.facts, std::min(read.scan.max_threads, common::thread_count(opt.limits.threads, 16)));
  std::string answer_key;
  if (answer.usable()) {
    read.walks = answer.walks();
    if (identity) {
      answer_key = answer.key(*identity);
    } else {
      if (machine.valid() && !machine_gpus()) return kExitUsage;
      const std::optional<DriverSettings> early = check_settings(opt, this_machine);
      if (!early) return kExitUsage;
      answer_key = answer.key(*resolved, group_settings(*resolved, *early, opt));
    }
    if (auto record = read.scan.facts->find_answer(answer_key))
      if (auto known = decode_answer(*record)) {
        std::fwrite(known->second.out.data(), 1, known->second.out.size(), stdout);
        std::fflush(stdout);
        std::fwrite(known->second.err.data(), 1, known->second.err.size(), stderr);
        return known->first;
      }
    g_printed.keep = true;
  }
  if (this_machine && !machine.valid() && !resolved && !start_machine()) return kExitUsage;
  std::optional<RunTimes> times;
  if (RunTimes::wanted()) times.emplace();
  const Inputs in = read_inputs(opt.files, read);
  if (machine.valid() && !machine_gpus()) return kExitUsage;
  if (times) times->read = RunTimes::since(times->start);
  const std::vector<Gpu> gpus = std::move(*resolved);
  const std::optional<DriverSettings> checked = check_settings(opt, this_machine);
  if (!checked) return kExitUsage;
  const DriverSettings& settings = *checked;
  if (this_machine && !opt.json) print_assumption(gpus, settings);
  // Objects as judged (archive members merged into their library).
  std::vector<std::vector<JudgedObject>> judged;
  std::vector<bool> wanted;  // inputs whose objects are judged (the others print one line)
  for (std::size_t ri = 0; ri < in.reports.size(); ++ri) {
    judged.push_back(judged_objects(in.reports[ri].objects));
    wanted.push_back(opt.json || has_device_code(in.reports[ri]));
  }
  const std::vector<DriverSettings> gpu_settings = group_settings(gpus, settings, opt);
  const RunTimes::Clock::time_point judging = RunTimes::Clock::now();
  Judgements judgements = judge_everything(judged, wanted, gpus, gpu_settings, opt, PayloadPages(in.reports), read.scan.limits,
                                           times ? &*times : nullptr);
  const RunTimes::Clock::time_point reporting = RunTimes::Clock::now();
  if (times) times->judge = std::chrono::duration<double>(reporting - judging).count();
  bool any_fail = false;
  nlohmann::json devices_json = nlohmann::json::array();
  std::vector<GroupOutcome> outcomes;
  for (std::size_t gi = 0; gi < gpus.size(); ++gi) {
    GpuReport report = check_gpu(gi, gpus, gpu_settings[gi], in, judgements, opt, any_fail);
    outcomes.push_back(report.outcome);
    if (opt.json) devices_json.push_back(device_json(gpus[gi], gpu_settings[gi], report));
  }
  const int code = !in.errors.empty() ? kExitUsage : any_fail ? kExitProblem
                                                              : kExitOk;
  if (opt.json) {
    nlohmann::json doc{{"schema", "archguard.check/2"},
                       {"this_machine", this_machine},
                       {"inputs", inputs_json(in)},
                       {"driver", settings.driver ? nlohmann::json(format_driver_version(*settings.driver)) : nlohmann::json(nullptr)},
                       {"force_ptx_jit", settings.force_ptx_jit},
                       {"disable_ptx_jit", settings.disable_ptx_jit},
                       {"devices", std::move(devices_json)},
                       {"fleet", opt.fleet.empty() ? nlohmann::json(nullptr) : fleet_json(gpus, outcomes)},
                       {"fails", any_fail},
                       {"errors", in.errors}};
    say("%s\n", cli::json_text(std::move(doc)).c_str());
  } else {
    if (!opt.fleet.empty()) print_fleet(gpus, outcomes);
    std::fflush(stdout);
    for (const auto& f : in.facts)
      for (const auto& k : f.skipped) {
        const std::string line = "archguard: note: not read: " + shown(k) + "\n";
        std::fputs(line.c_str(), stderr);
        if (g_printed.keep) g_printed.err += line;
      }
    print_errors(in.errors);
  }
  // Kept only for an answer without errors (one that may pass once the cause is mended).
  if (g_printed.keep && in.errors.empty() && code != kExitUsage) read.scan.facts->keep_answer(answer_key, encode_answer(code, g_printed));
  if (times) {
    times->report = RunTimes::since(reporting);
    times->print();
  }
  return code;
}

void setup(CLI::App& root, Context& ctx) {
  auto [cmd, opt] = add_command<CheckOptions>(root, ctx, "check", "Predict what the CUDA driver does with each file's device code on a GPU",
                                              run_check);
  cmd->add_option("files", opt->files, "Files or directories to check")->required();
  cmd->add_option("--cc", opt->cc, "Compute capability of the GPU, e.g. 9.0 (default: this machine's GPUs)")
      ->check(non_empty_cc());
  cmd->add_option("--driver", opt->driver, "Driver version, e.g. 580.65 (limits the PTX ISA it JIT-compiles)");
  cmd->add_option("--fleet", opt->fleet,
                  "A fleet report of 'archguard fleet merge' (judged per node group, with each group's driver), or a CSV "
                  "from 'nvidia-smi --query-gpu=name,compute_cap --format=csv' (many nodes concatenated)");
  cmd->add_flag("--tegra", opt->tegra, "The GPU is an integrated (Tegra) part");
  cmd->add_flag("--force-ptx-jit", opt->force_ptx_jit, "As with CUDA_FORCE_PTX_JIT=1: ignore SASS, JIT the PTX");
  cmd->add_flag("--disable-ptx-jit", opt->disable_ptx_jit, "As with CUDA_DISABLE_PTX_JIT=1: SASS only");
  cmd->add_flag("--from-env", opt->from_env,
                "Take CUDA_FORCE_PTX_JIT / CUDA_DISABLE_PTX_JIT from this environment (always so without --cc and --fleet)");
  cmd->add_flag("--no-kernels", opt->no_kernels,
                "Judge by fatbins first: decode no payload of an object whose fatbins all run (one with a fatbin "
                "that does not run is judged by its kernels)");
  cmd->add_flag("--no-deps", opt->no_deps, "Do not judge the shared libraries an executable or library loads");
  cmd->add_flag("--no-cache", opt->no_cache, "Decode every image again: do not use the results cache (docs/cli.md)");
  cmd->add_flag("--json", opt->json, "Machine-readable output (schema: docs/json-schema.md)");
  add_limit_flags(cmd, opt->limits);
}

}  // namespace

ARCHGUARD_VERB(setup);

}  // namespace archguard::cli
