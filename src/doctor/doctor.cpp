// SPDX-License-Identifier: Apache-2.0
// run(): the steps in order, then the final verdict.
#include "doctor/steps.hpp"

#include "common/parallel.hpp"
#include "common/text.hpp"
#include "common/version.hpp"
#include "fatbin/file_facts.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>

namespace archguard::doctor::detail {
extern const unsigned char kSmokeFatbin[];
extern const std::size_t kSmokeFatbin_size;
extern const char kSmokeFatbin_note[];

std::span<const std::byte> smoke_fatbin() {
  return {reinterpret_cast<const std::byte*>(kSmokeFatbin), kSmokeFatbin_size};  // NOLINT: bytes as bytes
}
std::string_view smoke_fatbin_targets() { return kSmokeFatbin_note; }

void keep_until_exit(std::shared_ptr<void> kept) {
  static std::mutex guard;
  static auto* const until_exit = new std::vector<std::shared_ptr<void>>();  // never destroyed
  const std::lock_guard<std::mutex> lock(guard);
  until_exit->push_back(std::move(kept));
}

namespace {

/// The ELF files of a directory step 2 looks at: regular files whose name holds ".so" or that
/// the owner may execute, in path order, at most this many.
constexpr std::size_t kMostCandidates = 4096;

/// What step 2 keeps of a file in the results cache: bit 0 an ELF file, bit 1 with device code,
/// bits 8 and up the N of libcudart.so.N it needs (0: none). A file that could not be read is 0.
std::uint32_t need_value(const Result<RuntimeNeed>& need) {
  if (!need || !need->elf) return 0;
  return 1u | (need->has_device_code ? 2u : 0u) | (need->cudart_major.value_or(0) << 8);
}

}  // namespace

RuntimeNeeds read_runtime_needs(const std::string& file, FactsStore* results, SharedWalk* walk) {
  using Values = ::archguard::detail::StampedValues;
  RuntimeNeeds out;
  std::vector<std::uint32_t> values;  // need_value of each file looked at
  std::error_code ec;
  if (!std::filesystem::is_directory(file, ec)) {
    const Result<RuntimeNeed> need = runtime_need(file);
    if (!need) out.first_error = need.message();
    values.push_back(need_value(need));
  } else {
    // The directory is listed as `check` and step 3 list it (in path order, on up to 16
    // threads, links below it not followed, hard links once), and what each candidate needs
    // comes from the results cache while its identity holds: a cache hit opens none of them.
    std::vector<std::string> walk_errors;  // step 3 reports the directories it could not read
    std::vector<ListedFile> files = list_files(file, common::thread_count(0, 16), walk_errors, walk);
    std::erase_if(files, [](const ListedFile& f) {
      return f.path.find(".so", f.path.rfind('/') + 1) == std::string::npos && (f.mode & S_IXUSR) == 0;
    });
    if (files.size() > kMostCandidates) {
      files.resize(kMostCandidates);
      out.note = " (first " + std::to_string(kMostCandidates) + " files)";
    }
    const std::string key = "runtime needs | " + ::archguard::detail::tree_key(file);
    std::optional<Values> known;
    if (results != nullptr)
      if (auto record = results->find_tree(key)) known = Values::decode(*record);
    std::vector<std::optional<Values::Digest>> digests(files.size());
    values.assign(files.size(), 0);
    // Each candidate's dynamic section is read on its own: a directory of a Python environment
    // holds thousands of shared libraries (the step waited for them one by one after the driver).
    const unsigned threads = static_cast<unsigned>(std::min<std::size_t>(common::thread_count(0, 16), files.size() / 64 + 1));
    common::parallel_for(files.size(), threads, [&](std::size_t i) {
      if (files[i].stamp) digests[i] = Values::digest(*files[i].stamp);
      if (const auto v = digests[i] && known ? known->find(*digests[i]) : std::nullopt) {
        values[i] = *v;
        return;
      }
      values[i] = need_value(runtime_need(files[i].path));
    });
    if (results != nullptr) {
      Values now;
      for (std::size_t i = 0; i < files.size(); ++i)
        if (digests[i]) now.add(*digests[i], values[i]);
      now.finish();
      if (now.size() > 0 && (!known || !(*known == now))) results->keep_tree(key, now.encode());
    }
  }
  for (const std::uint32_t v : values) {
    if ((v & 1u) == 0) continue;
    ++out.elf_files;
    const unsigned major = v >> 8;
    if (major != 0) out.majors.insert(major);
    if ((v & 2u) != 0) {
      ++out.device_code;
      if (major == 0) ++out.statically;
    }
  }
  return out;
}

namespace {

/// Step 2 for each file named: which cuda runtime it needs and whether the driver covers it.
void check_runtime_needs(Session& s, const Report& report, Step& step) {
  std::vector<RuntimeNeeds> read = s.runtime_needs.valid() ? s.runtime_needs.get() : std::vector<RuntimeNeeds>{};
  for (std::size_t i = 0; i < s.options->files.size(); ++i) {
    const std::string& file = s.options->files[i];
    const RuntimeNeeds n = i < read.size() ? std::move(read[i]) : read_runtime_needs(file);
    if (!n.first_error.empty()) {
      step.findings.push_back({Level::fail, file, n.first_error, "check the path", FixKind::other});
      continue;
    }
    if (n.elf_files == 0) {
      step.findings.push_back({Level::skip, file,
                               "no elf file to read a dynamic section from" + n.note + " (wheels are examined in step 3)", ""});
      continue;
    }
    std::string msg;
    Level status = Level::pass;
    std::string fix;
    if (n.majors.empty()) {
      msg = n.device_code > 0 ? "device code without libcudart.so in DT_NEEDED: the cuda runtime is linked statically "
                                "(or the driver api is used directly); its version is not recorded"
                              : "does not need the cuda runtime";
    } else {
      msg = "needs";
      for (unsigned m : n.majors) msg += " libcudart.so." + std::to_string(m);
      if (n.statically > 0) msg += "; " + std::to_string(n.statically) + " file(s) with device code link it statically";
      const unsigned newest = *n.majors.rbegin();
      if (report.driver_cuda && newest > report.driver_cuda->major) {
        status = Level::fail;
        const ReleaseRow* rel = find_release(Version2{newest, 0});
        msg += ": the cuda " + std::to_string(newest) + " runtime refuses a driver for cuda " + common::version_text(*report.driver_cuda) +
               " (cudaErrorInsufficientDriver, 35)";
        fix = "install driver >= " +
              (rel != nullptr && *rel->min_driver != '\0' ? std::string(rel->min_driver)
                                                          : "the one of cuda " + std::to_string(newest) + ".0");
      } else if (report.driver_cuda) {
        msg += ": covered by the driver (cuda " + common::version_text(*report.driver_cuda) + ")";
      }
    }
    step.findings.push_back({status, file, msg + n.note, fix, FixKind::driver});
  }
}

}  // namespace

Step step_versions(Session& s, Report& report) {
  Step step;
  step.number = 2;
  step.name = "versions";

  // The driver's own version: NVML, else nvidia-smi, else the kernel module.
  if (s.nvml.driver) report.driver_version = s.nvml.driver;
  else if (s.smi.driver) report.driver_version = s.smi.driver;
  else report.driver_version = probe_proc_driver_version();

  Version2 max_isa;
  if (report.driver_version) {
    max_isa = ptx_isa_for_driver(*report.driver_version);
    std::string msg = "driver " + format_driver_version(*report.driver_version);
    if (report.driver_cuda) msg += ", supports cuda " + common::version_text(*report.driver_cuda);
    msg += max_isa.empty() ? ", older than every release in the table" : ", accepts ptx isa up to " + common::version_text(max_isa);
    step.findings.push_back({Level::pass, "driver", msg, ""});
  } else if (report.driver_cuda) {
    step.findings.push_back({Level::pass, "driver",
                             "supports cuda " + common::version_text(*report.driver_cuda) +
                                 " (its version number is unknown: no NVML, nvidia-smi or /proc/driver/nvidia/version)",
                             ""});
  } else {
    step.findings.push_back({Level::skip, "driver", "no driver found: driver and cuda versions unknown", ""});
  }

  auto tool = [&](const char* name, const ToolVersion& t) {
    if (!t.version) {
      step.findings.push_back({Level::skip, name, t.problem, ""});
      return;
    }
    const ReleaseRow* rel = find_release(*t.version);
    std::string msg = std::string(name) + " " + common::version_text(*t.version) + " (" + t.where + ")";
    if (rel == nullptr) {
      step.findings.push_back({Level::warn, name, msg + ": a release archguard's table does not know",
                               "update archguard", FixKind::other});
      return;
    }
    msg += ", emits ptx isa " + common::version_text(rel->ptx_isa);
    if (!max_isa.empty() && rel->ptx_isa > max_isa) {
      const std::string need = min_driver_for_ptx_isa(rel->ptx_isa);
      step.findings.push_back(
          {Level::warn, name,
           msg + ": this driver accepts up to " + common::version_text(max_isa) +
               ", so ptx it builds fails to load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222) unless sass for the gpu is "
               "built too",
           "install driver >= " + (need.empty() ? std::string("the one of cuda ") + common::version_text(*t.version) : need) +
               ", or build sass for this gpu (see the rebuild fix)",
           FixKind::driver});
    } else {
      step.findings.push_back({Level::pass, name, msg, ""});
    }
  };
  tool("nvcc", s.nvcc);
  tool("nvrtc", s.nvrtc);

  check_runtime_needs(s, report, step);
  return step;
}

std::vector<Fix> collect_fixes(const Report& report) {
  std::vector<Fix> fixes;
  std::set<std::string> seen;
  auto add = [&](FixKind kind, const std::string& text, std::vector<std::string> details = {}) {
    if (text.empty() || !seen.insert(text).second) return;
    fixes.push_back({kind, text, std::move(details)});
  };
  // Failures first, then warnings; within each, step order.
  for (Level wanted : {Level::fail, Level::warn}) {
    for (const Step& step : report.steps) {
      for (const Finding& f : step.findings) {
        if (f.status != wanted || f.fix.empty()) continue;
        if (step.number == 3 && f.status == Level::fail) {
          // The cause that alone explains the failure first: when the environment does it
          // (CUDA_FORCE_PTX_JIT over a binary that has the SASS), unsetting it is the fix and a
          // rebuild only matters to whoever needs forced JIT.
          if (f.fix_kind == FixKind::environment) {
            add(f.fix_kind, f.fix);
            if (!f.cc.empty()) {
              Fix rf = rebuild_fix(f.cc, f.subject);
              add(FixKind::rebuild, "only if the program must run with forced JIT: " + rf.text, rf.details);
            }
            continue;
          }
          // A failure that judges a compute capability: the rebuild fix spells out its targets and
          // stands for the finding's own rebuild advice.
          if (!f.cc.empty()) {
            Fix rf = rebuild_fix(f.cc, f.subject);
            add(FixKind::rebuild, rf.text, rf.details);
          }
          if (f.fix_kind == FixKind::rebuild) continue;
        }
        add(f.fix_kind, f.fix);
      }
    }
  }
  return fixes;
}

}  // namespace archguard::doctor::detail

namespace archguard::doctor {

namespace {

// The name a node report carries: the one given, else the Slurm node this runs on (a Slurm
// NodeName need not be the host name), else the host name.
std::string node_name(const Options& options, const EnvLookup& env) {
  if (!options.node.empty()) return options.node;
  if (auto slurm = env("SLURMD_NODENAME"); slurm && !slurm->empty()) return *slurm;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') return host;
  return "localhost";
}

}  // namespace

Report run(const Options& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Report report;
  detail::Session s;
  s.options = &options;
  report.assumed_cc = options.assume_cc;
  s.env = options.env ? options.env : process_environment();
  auto timed = [&](auto&& step_fn) {
    const auto t = std::chrono::steady_clock::now();
    Step st = step_fn();
    st.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
    report.steps.push_back(std::move(st));
  };
  // The driver starts first: loading libcuda.so.1 and cuInit take 0.25 s on an H100 host and
  // seconds on some multi-GPU nodes. Step 1 waited for nvidia-smi and NVML before it began, so a
  // run took their time and the driver's one after the other.
  s.driver_opening = std::async(std::launch::async, detail::open_driver, options.libcuda);
  // The probes of other programs and libraries run side by side with it (nvidia-smi and NVML
  // take tens to hundreds of milliseconds each); their time counts towards step 1.
  auto smi = std::async(std::launch::async, detail::probe_nvidia_smi, options.nvidia_smi);
  auto nvml = std::async(std::launch::async, detail::probe_nvml, options.libnvml);
  auto nvcc = std::async(std::launch::async, detail::probe_nvcc, options.nvcc);
  auto nvrtc = std::async(std::launch::async, detail::probe_nvrtc);
  auto cudart = std::async(std::launch::async, detail::probe_cudart);
  // Both read the first FILE: a directory is walked once for the two.
  if (!options.files.empty()) s.walk = std::make_shared<SharedWalk>(options.files.front());
  if (!options.files.empty())
    s.first_file = std::async(std::launch::async, detail::read_first_file, std::cref(options), options.files.front(), s.env, s.walk.get());
  // What each FILE needs of the CUDA runtime (step 2) is read while the driver starts too.
  // One FILE after another, each on up to 16 threads.
  if (!options.files.empty())
    s.runtime_needs = std::async(std::launch::async, [&options, walk = s.walk] {
      std::vector<detail::RuntimeNeeds> out;
      for (const std::string& file : options.files) out.push_back(detail::read_runtime_needs(file, options.results, walk.get()));
      return out;
    });
  report.node = node_name(options, s.env);
  report.time = common::utc_now();
  timed([&] {
    s.smi = smi.get();
    s.nvml = nvml.get();
    return detail::step_devices(s, report);
  });
  s.nvcc = nvcc.get();
  s.nvrtc = nvrtc.get();
  s.cudart = cudart.get();
  for (const auto& [name, t] : {std::pair<const char*, const detail::ToolVersion*>{"nvcc", &s.nvcc}, {"nvrtc", &s.nvrtc}, {"cudart", &s.cudart}})
    if (t->version) report.runtimes.push_back({name, *t->version, t->where});
  timed([&] { return detail::step_versions(s, report); });
  timed([&] { return detail::step_binaries(s, report); });
  // The judging's memory goes before the smoke test's CUDA context comes (issue 25: doctor's
  // peak is the larger of the two, not their sum): the decoders' kept buffers, and the heap the
  // threads freed, which glibc keeps in its per-thread arenas.
  release_decode_scratch();
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
  timed([&] { return check_environment(s.env); });
  timed([&] { return detail::step_smoke(s, report); });
  // One cause, one status: when step 1 finds that CUDA_VISIBLE_DEVICES hides the gpus, step 4
  // (which reads only the text of the variable) must not call the same value fine.
  const Step& devices_step = report.steps[0];
  const auto hidden = std::find_if(devices_step.findings.begin(), devices_step.findings.end(), [](const Finding& f) {
    return f.subject == "CUDA_VISIBLE_DEVICES" && f.status == Level::fail;
  });
  if (hidden != devices_step.findings.end()) {
    for (Step& st : report.steps) {
      if (st.number != 4) continue;
      for (Finding& f : st.findings) {
        if (f.subject != "CUDA_VISIBLE_DEVICES" || f.status == Level::fail) continue;
        f.status = Level::fail;
        f.message += "; step 1: the driver sees no gpu through it";
        f.fix = hidden->fix;
        f.fix_kind = hidden->fix_kind;
      }
    }
  }
  // The walk of the first FILE, when it is a directory: the paths of every file under it.
  if (detail::left_to_exit(options) && s.walk) detail::keep_until_exit(std::move(s.walk));
  report.fixes = detail::collect_fixes(report);
  report.elapsed_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace archguard::doctor
