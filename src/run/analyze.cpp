// SPDX-License-Identifier: Apache-2.0
// The explanation of a recording: each failure traced from the pointer the driver was handed
// to the file that holds it, the translation unit, the kernel and the images, judged by the
// same engine as `archguard check` (check_object, judge_object, select_image), with the
// doctor's fixes. docs/run.md describes each step.
#include <archguard/container.hpp>
#include <archguard/coverage.hpp>
#include <archguard/elf.hpp>
#include <archguard/fatbin.hpp>
#include <archguard/run.hpp>

#include "common/driver_env.hpp"
#include "common/version.hpp"

#include <algorithm>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

namespace archguard::run {

std::string error_name(int result, bool runtime) {
  struct Row {
    int code;
    const char* rt;
    const char* drv;
  };
  static const Row kRows[] = {
      {0, "cudaSuccess", "CUDA_SUCCESS"},
      {1, "cudaErrorInvalidValue", "CUDA_ERROR_INVALID_VALUE"},
      {2, "cudaErrorMemoryAllocation", "CUDA_ERROR_OUT_OF_MEMORY"},
      {3, "cudaErrorInitializationError", "CUDA_ERROR_NOT_INITIALIZED"},
      {35, "cudaErrorInsufficientDriver", ""},
      {98, "cudaErrorInvalidDeviceFunction", ""},
      {100, "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE"},
      {200, "cudaErrorInvalidKernelImage", "CUDA_ERROR_INVALID_IMAGE"},
      {209, "cudaErrorNoKernelImageForDevice", "CUDA_ERROR_NO_BINARY_FOR_GPU"},
      {218, "cudaErrorInvalidPtx", "CUDA_ERROR_INVALID_PTX"},
      {221, "cudaErrorJitCompilerNotFound", "CUDA_ERROR_JIT_COMPILER_NOT_FOUND"},
      {222, "cudaErrorUnsupportedPtxVersion", "CUDA_ERROR_UNSUPPORTED_PTX_VERSION"},
      {223, "cudaErrorJitCompilationDisabled", "CUDA_ERROR_JIT_COMPILATION_DISABLED"},
      {300, "cudaErrorInvalidSource", "CUDA_ERROR_INVALID_SOURCE"},
      {301, "cudaErrorFileNotFound", "CUDA_ERROR_FILE_NOT_FOUND"},
      {400, "cudaErrorInvalidResourceHandle", "CUDA_ERROR_INVALID_HANDLE"},
      {500, "cudaErrorSymbolNotFound", "CUDA_ERROR_NOT_FOUND"},
      {700, "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS"},
      {701, "cudaErrorLaunchOutOfResources", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"},
      {719, "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED"},
  };
  for (const Row& r : kRows)
    if (r.code == result) return runtime ? r.rt : r.drv;
  return {};
}

bool may_be_architecture(int result, bool runtime) {
  switch (result) {
    case 209:
    case 222:
    case 223:
    case 218:
    case 200:
    case 500:
      return true;
    case 98:
      return runtime;
    default:
      return false;
  }
}

namespace {

std::string hex(std::uint64_t v) {
  std::ostringstream o;
  o << "0x" << std::hex << v;
  return o.str();
}

std::string image_name(const FatbinEntry& e) { return nvcc_name(e.arch, e.kind); }

std::vector<std::string> image_names(const Fatbin& fb) {
  std::vector<std::string> out;
  for (const auto& e : fb.entries) {
    std::string n = image_name(e);
    if (fb.section == FatbinSection::nv_relfatbin) n += " (rdc)";
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  }
  return out;
}

std::string base_name(const std::string& p) {
  const auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

/// A file of the process, read once: its device code (as `check` reads it) and its symbols.
struct FileFacts {
  std::string error;  // why it could not be read
  ScanReport scan;
  std::shared_ptr<const Storage> storage;
  std::optional<ElfFile> elf;
  std::vector<ElfSymbol> functions;                   // STT_FUNC with a value, by value
  std::map<std::string, ObjectJudgement> judgements;  // by "<cc>/<settings>"
};

class Files {
 public:
  FileFacts& get(const std::string& path) {
    auto it = files_.find(path);
    if (it != files_.end()) return *it->second;
    auto facts = std::make_unique<FileFacts>();
    ScanOptions so;
    so.threads = 1;
    if (auto scan = scan_path(path, so); scan) facts->scan = std::move(*scan);
    else facts->error = scan.error().message;
    if (auto st = map_file(path); st) {
      facts->storage = *st;
      if (auto elf = ElfFile::parse((*st)->bytes(), path); elf) {
        facts->elf = std::move(*elf);
        if (auto syms = facts->elf->symbols(); syms) {
          for (const ElfSymbol& s : *syms)
            if (s.type() == 2 /* STT_FUNC */ && s.value != 0) facts->functions.push_back(s);
          std::sort(facts->functions.begin(), facts->functions.end(),
                    [](const ElfSymbol& a, const ElfSymbol& b) { return a.value < b.value; });
        }
      }
    }
    auto& ref = *facts;
    files_.emplace(path, std::move(facts));
    return ref;
  }

 private:
  std::map<std::string, std::unique_ptr<FileFacts>> files_;
};

/// The function symbol at a file offset (mapped code), "" when none is known.
std::string symbol_at(const FileFacts& f, std::uint64_t offset) {
  if (!f.elf) return {};
  std::optional<std::uint64_t> vaddr;
  for (const ElfSection& s : f.elf->sections()) {
    if ((s.flags & 2) == 0 || s.type == 8 || s.size == 0) continue;  // SHF_ALLOC, not NOBITS
    if (offset >= s.offset && offset < s.offset + s.size) {
      vaddr = s.addr + (offset - s.offset);
      break;
    }
  }
  if (!vaddr) return {};
  auto it = std::upper_bound(f.functions.begin(), f.functions.end(), *vaddr,
                             [](std::uint64_t v, const ElfSymbol& s) { return v < s.value; });
  while (it != f.functions.begin()) {
    --it;
    if (it->value == *vaddr || *vaddr < it->value + std::max<std::uint64_t>(it->size, 1)) return std::string(it->name);
    if (it->value < *vaddr) break;
  }
  return {};
}

struct Judge {
  const ProcessRecording& proc;
  Files& files;
  DriverSettings settings;
  bool force = false, disable = false;

  std::optional<DeviceSeen> device(int ordinal) const {
    for (const auto& d : proc.devices)
      if (d.ordinal == ordinal) return d;
    if (proc.devices.size() == 1) return proc.devices.front();
    return std::nullopt;
  }

  Device device_of(const DeviceSeen& d) const {
    Device dev = device_for_cc(d.cc);
    dev.tegra = d.integrated;
    return dev;
  }

  const ObjectJudgement* judgement(FileFacts& f, const ObjectFatbins& object, const DeviceSeen& d) {
    const std::string key = object.path + "|" + common::version_text(d.cc);
    auto it = f.judgements.find(key);
    if (it != f.judgements.end()) return &it->second;
    const Device dev = device_of(d);
    const ObjectVerdict v = check_object(object, dev, settings);
    auto j = judge_object(object, v, dev, settings, /*all=*/true);
    return &f.judgements.emplace(key, std::move(j)).first->second;
  }

  /// Calls `each` with every verdict on `d` of kernel `name` in the objects of `f` that hold
  /// device code.
  template <class Each>
  void kernel_verdicts(FileFacts& f, const std::string& name, const DeviceSeen& d, Each each) {
    for (const ObjectFatbins& object : f.scan.objects) {
      if (object.fatbins.empty()) continue;
      for (const KernelVerdict& kv : judgement(f, object, d)->kernels)
        if (kv.kernel.name == name) each(kv);
    }
  }

  /// The fixes for a failing verdict, the cause that alone explains it first.
  std::vector<doctor::Fix> fixes_for(int error, Version2 cc, const std::string& why, bool memory_image) const {
    std::vector<doctor::Fix> out;
    if (error == kErrJitDisabled || (disable && error == kErrNoKernelImage)) {
      doctor::Fix f;
      f.kind = doctor::FixKind::environment;
      f.text = "unset CUDA_DISABLE_PTX_JIT (the driver may not compile the PTX this code carries)";
      out.push_back(f);
    }
    if (force && error == kErrNoKernelImage) {
      doctor::Fix f;
      f.kind = doctor::FixKind::environment;
      f.text =
          "unset CUDA_FORCE_PTX_JIT (it makes the driver ignore SASS and this code has no usable PTX); "
          "rebuild with PTX only if you need forced JIT";
      out.push_back(f);
    }
    if (error == kErrUnsupportedPtx) {
      doctor::Fix f;
      f.kind = doctor::FixKind::driver;
      f.text = "install a newer driver: the PTX is newer than this driver accepts";
      f.details.push_back("or rebuild with SASS for compute capability " + common::version_text(cc) +
                          " (SASS needs no JIT), or with the toolkit that matches the driver");
      out.push_back(f);
    }
    if (memory_image) {
      doctor::Fix f;
      f.kind = doctor::FixKind::rebuild;
      const std::string n = arch_number(Arch{cc.packed(), Suffix::none});
      f.text = "compile the code for the device before loading it: compute capability " + common::version_text(cc);
      f.details.push_back("NVRTC: --gpu-architecture=sm_" + n + " (SASS) or --gpu-architecture=compute_" + n +
                          " (PTX the driver compiles)");
      f.details.push_back("CudaArchGuard::jit compiles for the device it runs on (archguard/jit.hpp)");
      f.details.push_back("a file built ahead of time: nvcc -gencode arch=compute_" + n + ",code=[sm_" + n + ",compute_" +
                          n + "]");
      out.push_back(f);
      return out;
    }
    out.push_back(doctor::rebuild_fix(cc, why));
    return out;
  }

  std::string predicted_text(const Verdict& v, std::span<const Image> images) const {
    if (v.outcome == Outcome::fail) return "fail " + std::to_string(v.cuda_error);
    std::string n;
    if (v.image && *v.image < images.size()) n = nvcc_name(images[*v.image].arch, images[*v.image].kind);
    return std::string(v.outcome == Outcome::native ? "native" : "jit") + (n.empty() ? "" : " (" + n + ")");
  }

  std::string kernel_predicted(const KernelVerdict& kv) const {
    if (kv.verdict.outcome == Outcome::fail) return "fail " + std::to_string(kv.verdict.cuda_error);
    return kv.verdict.outcome == Outcome::native ? "native" : "jit";
  }

  /// Whether `kernel` is defined only in relocatable (-rdc) images and missing from every image
  /// of the linked code that the device can use: nvlink dropped it (or never had it).
  bool device_link_drop(const ObjectFatbins& object, const std::string& kernel, const Device& dev,
                        std::vector<std::string>& rdc_images, std::string& rdc_tu) const {
    bool in_rdc = false, in_usable = false;
    for (const Fatbin& fb : object.fatbins) {
      for (const FatbinEntry& e : fb.entries) {
        if (e.kind == CodeKind::ltoir) continue;
        auto bytes = decompress(e, object.path);
        if (!bytes) continue;
        auto kernels = list_kernels(e, *bytes, object.path);
        if (!kernels) continue;
        const bool has = std::any_of(kernels->begin(), kernels->end(), [&](const Kernel& k) { return k.name == kernel; });
        if (!has) continue;
        if (fb.section == FatbinSection::nv_relfatbin) {
          in_rdc = true;
          rdc_images.push_back(image_name(e));
          if (rdc_tu.empty()) rdc_tu = fb.translation_unit.empty() ? fb.identifier() : fb.translation_unit;
        } else {
          const bool usable = e.kind == CodeKind::sass ? sass_runs_on(e.arch, dev) : ptx_targets(e.arch, dev);
          if (usable) in_usable = true;
        }
      }
    }
    return in_rdc && !in_usable;
  }

  /// A device-link drop of `x.kernel` in `object`, explained; false when it is not one.
  bool explain_drop(Explained& x, const ObjectFatbins& object, const DeviceSeen& d) const {
    std::vector<std::string> rdc_images;
    std::string rdc_tu;
    if (x.kernel.empty() || !device_link_drop(object, x.kernel, device_of(d), rdc_images, rdc_tu)) return false;
    x.architecture = true;
    if (!rdc_tu.empty()) x.translation_unit = rdc_tu;
    std::string imgs;
    for (const auto& i : rdc_images) imgs += (imgs.empty() ? "" : ", ") + i;
    x.images = rdc_images;
    x.predicted = "fail 500";  // check names the drop (judge_object); this path is for files it could not judge
    x.cause = "device-link drop: the kernel is defined only in relocatable (-rdc) code for " + imgs +
              (rdc_tu.empty() ? "" : " (" + rdc_tu + ")") +
              ", and the code the program was device-linked into has no image of it that runs on compute capability " +
              common::version_text(d.cc) + " (nvlink leaves out objects not built for the linked architecture)";
    x.fixes = fixes_for(kErrNoKernelImage, d.cc,
                        "the object or static library that defines the kernel" +
                            (rdc_tu.empty() ? std::string() : " (" + rdc_tu + ")") +
                            " must be built for every architecture the program is device-linked for",
                        false);
    return true;
  }

  /// Fills an explanation for kernel `kernel` of file `path` that failed with `error` on `d`.
  void explain_in_file(Explained& x, const std::string& path, const DeviceSeen& d, bool runtime) {
    FileFacts& f = files.get(path);
    x.file = path;
    if (!f.error.empty()) {
      x.cause = "the file could not be read: " + f.error;
      return;
    }
    for (const ObjectFatbins& object : f.scan.objects) {
      if (object.fatbins.empty()) continue;
      const ObjectJudgement* j = judgement(f, object, d);
      const KernelVerdict* kv = nullptr;
      for (const KernelVerdict& k : j->kernels)
        if (!x.kernel.empty() && k.kernel.name == x.kernel) kv = &k;
      if (kv == nullptr) continue;
      x.translation_unit = kv->translation_unit.empty() ? kv->identifier : kv->translation_unit;
      x.fatbin = kv->fatbin;
      for (const Fatbin& fb : object.fatbins)
        if (fb.index == kv->fatbin) x.images = image_names(fb);
      x.predicted = kernel_predicted(*kv);
      if (kv->verdict.outcome == Outcome::fail && !kv->link_drop.empty()) {
        // check names the drop itself (coverage.hpp): its words, the object's fix
        if (explain_drop(x, object, d)) {  // the relocatable images and their unit, as run reads them
          x.predicted = kernel_predicted(*kv);
          return;
        }
        x.architecture = true;
        if (!kv->link_drop_object.empty() && kv->link_drop_object.rfind("fatbin ", 0) != 0) x.translation_unit = kv->link_drop_object;
        x.cause = "device-link drop: " + kv->link_drop + " (compute capability " + common::version_text(d.cc) + ")";
        x.fixes = fixes_for(kErrNoKernelImage, d.cc,
                            "the object or static library that defines the kernel must be built for every architecture the "
                            "program is device-linked for",
                            false);
        return;
      }
      if (kv->verdict.outcome == Outcome::fail) {
        x.architecture = true;
        x.cause = "no usable image for compute capability " + common::version_text(d.cc) + ": " + kv->verdict.reason;
        const std::string unit = unit_label(kv->fatbin, kv->translation_unit, kv->identifier);
        x.fixes = fixes_for(x.error, d.cc, base_name(path) + ": " + unit, false);
        return;
      }
      if (explain_drop(x, object, d)) return;
      x.architecture = false;
      x.cause = "archguard predicts this kernel runs (" + kv->verdict.reason + ") but the driver refused it with " +
                std::to_string(x.error) + (may_be_architecture(x.error, runtime) ? "" : ": not an architecture error");
      return;
    }
    // The kernel is in none of the fatbins that decide: a device-link drop, or not there at all.
    for (const ObjectFatbins& object : f.scan.objects)
      if (!object.fatbins.empty() && explain_drop(x, object, d)) return;
    bool any = false;
    for (const auto& o : f.scan.objects) any = any || !o.fatbins.empty();
    if (!any) {
      x.cause = "the launching code is in " + base_name(path) + ", which carries no device code: the kernel's image is " +
                "registered from another object, or was never linked in";
    } else {
      x.cause = "no fatbin of " + base_name(path) + " defines the kernel" +
                (x.kernel.empty() ? std::string(" (its name is unknown: the file has no symbol table)") : std::string());
    }
    x.architecture = x.error == kErrNoKernelImage;
    if (x.architecture) x.fixes = fixes_for(x.error, d.cc, base_name(path), false);
  }

  /// Reads the image an Origin names: from a copy, a file at an offset, or a file.
  struct LoadedImage {
    std::shared_ptr<const Storage> storage;
    std::vector<std::byte> owned;
    std::optional<Fatbin> fatbin;
    std::string error;
  };

  LoadedImage read_image(const Origin& o, const std::string& dir) const {
    LoadedImage li;
    std::string path;
    std::uint64_t offset = 0;
    if (!o.copy.empty()) path = dir + "/" + o.copy;
    else if (o.kind == "mapped" || o.kind == "file") {
      path = o.path;
      offset = o.offset;
    } else {
      li.error = "the image was in memory" + (o.copy_note.empty() ? std::string(" and was not copied") : " (" + o.copy_note + ")");
      return li;
    }
    auto st = map_file(path);
    if (!st) {
      li.error = st.error().message;
      return li;
    }
    li.storage = *st;
    const Bytes all = (*st)->bytes();
    if (offset >= all.size()) {
      li.error = path + ": offset " + hex(offset) + " lies past the end " + hex(all.size());
      return li;
    }
    Bytes bytes = all.subspan(offset);
    if (o.size != 0 && o.size <= bytes.size()) bytes = bytes.first(o.size);
    ByteReader r(all, path);
    if (auto magic = r.u32(offset, "magic"); magic && *magic == kFatbinMagic) {
      auto fb = Fatbin::parse(r, offset, 0);
      if (fb) li.fatbin = std::move(*fb);
      else li.error = fb.error().message;
      return li;
    }
    if (auto magic = r.u32(offset, "magic"); magic && *magic == kFatbinWrapperMagic && o.kind == "file") {
      li.error = path + ": a fatbin wrapper in a file";
      return li;
    }
    // A whole file named to cuModuleLoad may itself be a fatbin file or an ELF host file.
    if (o.kind == "file" && offset == 0) {
      if (auto scan = scan_bytes(bytes, path); scan && !scan->objects.empty() && !scan->objects.front().fatbins.empty()) {
        li.fatbin = scan->objects.front().fatbins.front();
        li.storage = *st;
        return li;
      }
    }
    auto sa = read_standalone(bytes, path);
    if (sa) li.fatbin = std::move(*sa);
    else li.error = sa.error().message;
    return li;
  }

  /// The translation unit and fatbin number of a fatbin handed over from a file mapping: the
  /// file's own fatbin at that offset, as `check` reads it.
  void unit_of_origin(Explained& x, const Origin& o) {
    if (o.kind != "mapped" || o.path.empty()) return;
    FileFacts& f = files.get(o.path);
    for (const ObjectFatbins& object : f.scan.objects)
      for (const Fatbin& fb : object.fatbins)
        if (fb.offset == o.offset) {
          x.fatbin = fb.index;
          x.translation_unit = fb.translation_unit.empty() ? fb.identifier() : fb.translation_unit;
          return;
        }
  }

  Explained explain_load(const LoadEvent& l, const std::string& dir) {
    Explained x;
    x.api = l.api;
    x.error = l.result;
    x.error_name = error_name(l.result, false);
    x.device = l.device;
    x.origin = l.origin;
    x.file = l.origin.kind == "memory" ? std::string() : l.origin.path;
    const auto d = device(l.device);
    if (d) x.cc = d->cc;
    LoadedImage li = read_image(l.origin, dir);
    if (!li.fatbin) {
      x.cause = li.error;
      x.architecture = l.result != 0 && may_be_architecture(l.result, false);
      if (x.architecture && d) x.fixes = fixes_for(l.result, d->cc, "", l.origin.kind == "memory");
      return x;
    }
    x.images = image_names(*li.fatbin);
    unit_of_origin(x, l.origin);
    if (!d) {
      x.cause = "the device is not known (no context was described)";
      return x;
    }
    const auto images = li.fatbin->images();
    const Verdict v = select_image(images, device_of(*d), settings);
    x.predicted = predicted_text(v, images);
    if (l.result == 0) {
      x.cause = x.predicted;
      return x;
    }
    if (v.outcome == Outcome::fail) {
      x.architecture = true;
      x.cause = "no usable image for compute capability " + common::version_text(d->cc) + ": " + v.reason;
      const bool memory = l.origin.kind == "memory";
      x.fixes = fixes_for(l.result, d->cc, memory ? std::string() : base_name(l.origin.path), memory);
    } else {
      x.architecture = false;
      x.cause = "archguard predicts the image loads (" + v.reason + ") but the driver refused it with " +
                std::to_string(l.result);
    }
    return x;
  }

  const LoadEvent* load_with_handle(const std::string& handle) const {
    if (handle.empty() || handle == "0x0") return nullptr;
    for (const auto& l : proc.loads)
      if (l.handle == handle && l.result == 0) return &l;
    return nullptr;
  }

  Explained explain_failure(const FailEvent& e, const std::string& dir) {
    Explained x;
    x.api = e.api;
    x.error = e.result;
    x.error_name = error_name(e.result, e.runtime);
    x.count = e.count;
    x.device = e.device;
    x.kernel = e.kernel;
    const auto d = device(e.device);
    if (d) x.cc = d->cc;
    if (e.runtime && e.func.kind == "mapped") {
      FileFacts& f = files.get(e.func.path);
      if (x.kernel.empty()) x.kernel = symbol_at(f, e.func.offset);
      x.origin = e.func;
    }
    x.kernel_demangled = x.kernel.empty() ? std::string() : demangle(x.kernel);
    if (!d) {
      x.cause = "the device is not known";
      x.architecture = may_be_architecture(e.result, e.runtime);
      return x;
    }
    if (e.runtime) {
      if (e.func.kind != "mapped") {
        x.cause = "the host function " + e.func.address + " lies in no file of the process";
        x.architecture = may_be_architecture(e.result, true);
        return x;
      }
      explain_in_file(x, e.func.path, *d, true);
      return x;
    }
    // Driver API: the module or library the kernel came from.
    const LoadEvent* l = load_with_handle(!e.owner.empty() ? e.owner : e.module);
    if (l == nullptr) {
      x.cause = "the module was loaded by a call archguard did not see (loaded before recording started, or by the runtime)";
      x.architecture = may_be_architecture(e.result, false);
      if (x.architecture) x.fixes = fixes_for(e.result, d->cc, "", false);
      return x;
    }
    x.origin = l->origin;
    x.file = l->origin.kind == "memory" ? std::string() : l->origin.path;
    if (l->origin.kind == "mapped" && !x.kernel.empty()) {
      // The library came from a file: judge the kernel there as check does (every fatbin of the
      // file, device-link drops included), which also names its translation unit.
      Explained y = x;
      explain_in_file(y, l->origin.path, *d, false);
      if (y.architecture) {
        y.origin = l->origin;
        return y;
      }
    }
    LoadedImage li = read_image(l->origin, dir);
    if (!li.fatbin) {
      x.cause = li.error;
      return x;
    }
    x.images = image_names(*li.fatbin);
    unit_of_origin(x, l->origin);
    const auto images = li.fatbin->images();
    const Verdict v = select_image(images, device_of(*d), settings);
    x.predicted = predicted_text(v, images);
    if (v.outcome != Outcome::fail && v.image && *v.image < li.fatbin->entries.size()) {
      // The image the driver picked: does it define the kernel?
      const FatbinEntry& used = li.fatbin->entries[*v.image];
      if (auto bytes = decompress(used, l->origin.path); bytes) {
        if (auto kernels = list_kernels(used, *bytes, l->origin.path); kernels && !x.kernel.empty()) {
          const bool has = std::any_of(kernels->begin(), kernels->end(), [&](const Kernel& k) { return k.name == x.kernel; });
          if (!has) {
            std::vector<std::string> others;
            for (const FatbinEntry& e2 : li.fatbin->entries) {
              if (&e2 == &used) continue;
              auto b2 = decompress(e2, l->origin.path);
              if (!b2) continue;
              auto k2 = list_kernels(e2, *b2, l->origin.path);
              if (k2 && std::any_of(k2->begin(), k2->end(), [&](const Kernel& k) { return k.name == x.kernel; }))
                others.push_back(image_name(e2));
            }
            x.architecture = !others.empty();
            std::string o;
            for (const auto& s : others) o += (o.empty() ? "" : ", ") + s;
            x.cause = "the image the driver uses on this GPU (" + image_name(used) + ") does not define the kernel" +
                      (others.empty() ? std::string(", nor does any other image: the name is wrong or the kernel was never compiled in")
                                      : "; it is only in " + o);
            if (x.architecture) x.fixes = fixes_for(kErrNoKernelImage, d->cc, base_name(l->origin.path), l->origin.kind == "memory");
            return x;
          }
        }
      }
      x.cause = "archguard predicts the module's image runs (" + v.reason + "); the call failed with " + std::to_string(e.result);
      return x;
    }
    x.architecture = true;
    x.cause = "no usable image for compute capability " + common::version_text(d->cc) + ": " + v.reason;
    x.fixes = fixes_for(e.result, d->cc, base_name(l->origin.path), l->origin.kind == "memory");
    return x;
  }
};

}  // namespace

namespace {

/// What the recording says of the process as it is, before anything is judged.
ProcessReport recorded_facts(const ProcessRecording& proc) {
  ProcessReport pr;
  pr.pid = proc.pid;
  pr.ppid = proc.ppid;
  pr.argv = proc.argv;
  pr.recorder_status = proc.recorder_status;
  pr.recorder_detail = proc.recorder_detail;
  pr.devices = proc.devices;
  pr.env = proc.env;
  pr.launches = proc.launches;
  pr.failed_launches = proc.failed_launches;
  pr.module_loads = proc.module_loads;
  pr.modules = proc.modules_loaded;
  pr.complete = proc.complete;
  pr.problems = proc.problems;
  return pr;
}

/// The judge of one process, with the driver settings its environment and driver made.
Judge judge_for(const ProcessRecording& proc, Files& files) {
  Judge judge{proc, files, {}, false, false};
  auto env_of = [&](const char* k) -> std::optional<std::string> {
    auto it = proc.env.find(k);
    return it == proc.env.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  judge.force = common::driver_switch_on(env_of("CUDA_FORCE_PTX_JIT"));
  judge.disable = common::driver_switch_on(env_of("CUDA_DISABLE_PTX_JIT"));
  judge.settings.force_ptx_jit = judge.force;
  judge.settings.disable_ptx_jit = judge.disable;
  if (!proc.driver_version_line.empty())
    judge.settings.driver = doctor::parse_proc_driver_version(proc.driver_version_line);
  return judge;
}

/// Whether a load's observed outcome contradicts the prediction `x`; `observed` says what was seen.
bool load_disagrees(const ProcessRecording& proc, const LoadEvent& l, const Explained& x, std::string& observed) {
  const bool pred_fail = x.predicted.rfind("fail", 0) == 0;
  // cuLibraryLoad* loads lazily: it succeeds whatever the library holds, and the verdict
  // comes at the first lookup of a kernel (cuLibraryGetKernel, cuKernelGetFunction), whose
  // failure names the library. A predicted failure is confirmed by such a failure, and
  // contradicted only by a module the driver then loaded from it (seen as no failure
  // while kernels of it were looked up: not knowable here, so not called a disagreement).
  const bool lazy = l.api.rfind("cuLibraryLoad", 0) == 0 && l.result == 0;
  int later = 0;  // the error of a later lookup in this library
  for (const FailEvent& f : proc.failures)
    if (!f.runtime && f.owner == l.handle && may_be_architecture(f.result, false)) later = f.result;
  observed = l.result == 0 ? "loaded" : std::to_string(l.result) + " at " + l.api;
  if (lazy) {
    if (later != 0) observed = std::to_string(later) + " at the first kernel lookup";
    return (!pred_fail && later != 0) || (pred_fail && later != 0 && x.predicted != "fail " + std::to_string(later));
  }
  return pred_fail != (l.result != 0) || (pred_fail && x.predicted != "fail " + std::to_string(l.result));
}

/// Every module and library load of the process, explained (and checked against the prediction).
void judge_loads(const ProcessRecording& proc, Judge& judge, const std::string& dir, const AnalyzeOptions& options,
                 Report& report, ProcessReport& pr) {
  for (const LoadEvent& l : proc.loads) {
    Explained x = judge.explain_load(l, dir);
    if (l.result != 0) {
      (x.architecture ? report.architecture_failures : report.other_failures) += 1;
      pr.failures.push_back(x);
    } else if (x.predicted.rfind("jit", 0) == 0) {
      pr.jit.push_back({x.file.empty() ? "image from memory" : base_name(x.file), x.file, x.predicted, l.ms});
    }
    if (options.predict && !x.predicted.empty()) {
      std::string observed;
      if (load_disagrees(proc, l, x, observed))
        pr.disagreements.push_back({l.api + " of " + (x.file.empty() ? std::string("an image from memory") : x.file), x.file,
                                    x.predicted, observed, ""});
    }
    pr.loads.push_back(std::move(x));
  }
}

/// Every failed call of the process, explained once.
void judge_failures(const ProcessRecording& proc, Judge& judge, const std::string& dir, const AnalyzeOptions& options,
                    Report& report, ProcessReport& pr) {
  // A driver failure made inside a runtime call is the runtime failure seen from below: keep
  // the runtime one, which names the host function.
  // So is a failed kernel lookup the runtime made for a launch that then failed with the same
  // error (the runtime resolves the kernel before its launch callback): the runtime entry names
  // the host function and so the translation unit.
  const bool runtime_failed = std::any_of(proc.failures.begin(), proc.failures.end(), [](const FailEvent& f) { return f.runtime; });
  std::vector<Explained> runtime_explained;
  for (const FailEvent& e : proc.failures)
    if (e.runtime) runtime_explained.push_back(judge.explain_failure(e, dir));
  std::size_t next_runtime = 0;
  for (const FailEvent& e : proc.failures) {
    if (!e.runtime && !e.inside.empty() && runtime_failed) continue;
    if (!e.runtime && !e.kernel.empty() &&
        std::any_of(runtime_explained.begin(), runtime_explained.end(),
                    [&](const Explained& r) { return r.kernel == e.kernel && r.error == e.result; }))
      continue;
    Explained x = e.runtime ? runtime_explained[next_runtime++] : judge.explain_failure(e, dir);
    (x.architecture ? report.architecture_failures : report.other_failures) += 1;
    if (options.predict && may_be_architecture(e.result, e.runtime) && !x.predicted.empty() &&
        x.predicted.rfind("fail", 0) != 0)
      pr.disagreements.push_back({x.kernel_demangled.empty() ? x.kernel : x.kernel_demangled, x.file, x.predicted,
                                  std::to_string(e.result) + " at " + e.api,
                                  ""});
    pr.failures.push_back(std::move(x));
  }
}

/// The kernels the driver jit-compiled at their first call (lazy loading).
void lazy_jit(const ProcessRecording& proc, Judge& judge, Files& files, ProcessReport& pr) {
  for (const LazyEvent& lz : proc.lazy) {
    if (lz.func.kind != "mapped") continue;
    const auto d = judge.device(lz.device);
    if (!d) continue;
    FileFacts& f = files.get(lz.func.path);
    const std::string k = symbol_at(f, lz.func.offset);
    if (k.empty()) continue;
    judge.kernel_verdicts(f, k, *d, [&](const KernelVerdict& kv) {
      if (kv.verdict.outcome == Outcome::jit) pr.jit.push_back({kv.kernel.demangled, lz.func.path, kv.verdict.reason, lz.ms});
    });
  }
}

/// Kernels that launched although check predicted they fail (on a process of one device).
void launched_disagreements(const ProcessRecording& proc, Judge& judge, Files& files, ProcessReport& pr) {
  std::set<std::string> judged;
  const std::optional<DeviceSeen> only = proc.devices.size() == 1 ? std::optional<DeviceSeen>(proc.devices.front()) : std::nullopt;
  for (const LaunchedEvent& le : proc.launched) {
    if (le.func.kind != "mapped" || !only) continue;
    FileFacts& f = files.get(le.func.path);
    const std::string k = symbol_at(f, le.func.offset);
    if (k.empty()) continue;
    judged.insert(le.func.path);
    judge.kernel_verdicts(f, k, *only, [&](const KernelVerdict& kv) {
      if (kv.verdict.outcome == Outcome::fail)
        pr.disagreements.push_back({kv.kernel.demangled, le.func.path, "fail " + std::to_string(kv.verdict.cuda_error),
                                    "launched", "a false alarm of check"});
    });
  }
  pr.predicted_objects = judged.size();
}

}  // namespace

Report analyze(const Recording& recording, const AnalyzeOptions& options) {
  Report report;
  Files files;
  const std::string dir = options.dir.empty() ? recording.dir : options.dir;
  for (const ProcessRecording& proc : recording.processes) {
    ProcessReport pr = recorded_facts(proc);
    if (proc.recorder_status == "ok") report.recorded = true;
    else if (!proc.recorder_detail.empty())
      report.problems.push_back("process " + std::to_string(proc.pid) + ": " + proc.recorder_detail);
    Judge judge = judge_for(proc, files);
    judge_loads(proc, judge, dir, options, report, pr);
    judge_failures(proc, judge, dir, options, report, pr);
    lazy_jit(proc, judge, files, pr);
    if (options.predict) launched_disagreements(proc, judge, files, pr);
    report.disagreements += pr.disagreements.size();
    report.processes.push_back(std::move(pr));
  }
  if (recording.processes.empty())
    report.problems.push_back("no process initialised CUDA (no event file was written): nothing was recorded");
  return report;
}

}  // namespace archguard::run
