// SPDX-License-Identifier: Apache-2.0
// NVRTC through dlopen, its identity (version, supported archs, GNU build id), and compiling.
#include "jit/nvrtc.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>

namespace archguard::jit {
namespace {

template <class Fn>
bool resolve(void* handle, Fn& slot, const char* name) {
  void* p = ::dlsym(handle, name);
  if (p == nullptr) return false;
  static_assert(sizeof(Fn) == sizeof(void*));
  std::memcpy(&slot, &p, sizeof slot);
  return true;
}

// The GNU build id of the loaded object containing `addr`, read from its PT_NOTE segments.
struct BuildIdSearch {
  const void* addr = nullptr;
  std::string id;
};

int find_build_id(dl_phdr_info* info, std::size_t, void* data) {
  auto* s = static_cast<BuildIdSearch*>(data);
  const auto target = reinterpret_cast<ElfW(Addr)>(s->addr);
  bool contains = false;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    const ElfW(Addr) start = info->dlpi_addr + ph.p_vaddr;
    if (target >= start && target < start + ph.p_memsz) contains = true;
  }
  if (!contains) return 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    // The segment is mapped memory of a loaded library; walk its notes with bounds checks.
    const auto* base = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
    std::size_t off = 0;
    while (off + sizeof(ElfW(Nhdr)) <= ph.p_memsz) {
      ElfW(Nhdr) nh;
      std::memcpy(&nh, base + off, sizeof nh);
      const std::size_t name_at = off + sizeof nh;
      const std::size_t desc_at = name_at + ((nh.n_namesz + 3u) & ~3u);
      const std::size_t next = desc_at + ((nh.n_descsz + 3u) & ~3u);
      if (next > ph.p_memsz || next <= off) break;
      if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && std::memcmp(base + name_at, "GNU", 4) == 0) {
        static constexpr char kHex[] = "0123456789abcdef";
        for (std::size_t k = 0; k < nh.n_descsz; ++k) {
          const unsigned char b = base[desc_at + k];
          s->id.push_back(kHex[b >> 4]);
          s->id.push_back(kHex[b & 0xf]);
        }
        return 1;
      }
      off = next;
    }
  }
  return 1;
}

std::string join_options(const std::vector<std::string>& options) {
  std::string s;
  for (const std::string& o : options) {
    if (!s.empty()) s += ' ';
    s += o;
  }
  return s;
}

// The source lines NVRTC's log points at ("name(12): error: ..."), numbered.
std::string quoted_lines(const std::string& log, const std::string& name, const std::string& source) {
  std::set<unsigned> lines;
  const std::string needle = name + "(";
  for (std::size_t p = log.find(needle); p != std::string::npos; p = log.find(needle, p + 1)) {
    if (p > 0 && log[p - 1] != '\n' && log[p - 1] != ' ') continue;
    std::size_t q = p + needle.size();
    unsigned n = 0;
    bool digits = false;
    while (q < log.size() && log[q] >= '0' && log[q] <= '9') {
      n = n * 10 + static_cast<unsigned>(log[q] - '0');
      digits = true;
      ++q;
    }
    if (digits && q < log.size() && log[q] == ')' && n > 0) lines.insert(n);
  }
  if (lines.empty()) return {};
  std::vector<std::string> text;
  std::istringstream in(source);
  for (std::string l; std::getline(in, l);) text.push_back(l);
  std::string out;
  for (unsigned n : lines) {
    if (n > text.size()) continue;
    out += "  " + name + ":" + std::to_string(n) + ": " + text[n - 1] + "\n";
    if (lines.size() > 20) break;
  }
  return out;
}

}  // namespace

std::string arch_option(const Target& target) {
  return nvcc_name(target.arch, target.kind == CodeKind::sass ? CodeKind::sass : CodeKind::ptx);
}

std::string Nvrtc::describe(int result) const {
  const char* s = api_.nvrtcGetErrorString != nullptr ? api_.nvrtcGetErrorString(result) : nullptr;
  return std::string(s != nullptr ? s : "NVRTC_ERROR_UNKNOWN") + " (" + std::to_string(result) + ")";
}

Result<NvrtcPtr> load_nvrtc(const std::string& library) {
  std::vector<std::string> candidates;
  if (!library.empty()) {
    candidates.push_back(library);
  } else if (const char* env = std::getenv("ARCHGUARD_NVRTC"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    candidates = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  }
  std::string tried;
  void* h = nullptr;
  std::string used;
  for (const std::string& c : candidates) {
    ::dlerror();
    h = ::dlopen(c.c_str(), RTLD_LAZY | RTLD_LOCAL);
    if (h != nullptr) {
      used = c;
      break;
    }
    const char* e = ::dlerror();
    if (!tried.empty()) tried += ", ";
    tried += c + " (" + (e != nullptr ? e : "unknown error") + ")";
  }
  if (h == nullptr) {
    return make_error(ErrorKind::nvrtc, "no nvrtc: tried " + tried + "; install the CUDA toolkit's nvrtc or set ARCHGUARD_NVRTC");
  }
  std::shared_ptr<Nvrtc> n(new Nvrtc());
  n->handle_ = h;
  NvrtcApi& a = n->api_;
  std::string missing;
  auto need = [&](auto& slot, const char* name) {
    if (!resolve(h, slot, name)) missing += std::string(missing.empty() ? "" : ", ") + name;
  };
  need(a.nvrtcVersion, "nvrtcVersion");
  need(a.nvrtcGetNumSupportedArchs, "nvrtcGetNumSupportedArchs");
  need(a.nvrtcGetSupportedArchs, "nvrtcGetSupportedArchs");
  need(a.nvrtcGetErrorString, "nvrtcGetErrorString");
  need(a.nvrtcCreateProgram, "nvrtcCreateProgram");
  need(a.nvrtcDestroyProgram, "nvrtcDestroyProgram");
  need(a.nvrtcCompileProgram, "nvrtcCompileProgram");
  need(a.nvrtcGetPTXSize, "nvrtcGetPTXSize");
  need(a.nvrtcGetPTX, "nvrtcGetPTX");
  need(a.nvrtcGetCUBINSize, "nvrtcGetCUBINSize");
  need(a.nvrtcGetCUBIN, "nvrtcGetCUBIN");
  need(a.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize");
  need(a.nvrtcGetProgramLog, "nvrtcGetProgramLog");
  need(a.nvrtcAddNameExpression, "nvrtcAddNameExpression");
  need(a.nvrtcGetLoweredName, "nvrtcGetLoweredName");
  if (!missing.empty()) return make_error(ErrorKind::nvrtc, "no usable nvrtc: " + used + " lacks " + missing);
  resolve(h, a.nvrtcGetLTOIRSize, "nvrtcGetLTOIRSize");
  resolve(h, a.nvrtcGetLTOIR, "nvrtcGetLTOIR");

  NvrtcInfo& info = n->info_;
  int major = 0, minor = 0;
  if (int r = a.nvrtcVersion(&major, &minor); r != 0) {
    return make_error(ErrorKind::nvrtc, "nvrtc " + used + ": nvrtcVersion failed: " + n->describe(r), r);
  }
  info.version = Version2{static_cast<unsigned>(major), static_cast<unsigned>(minor)};
  int count = 0;
  if (int r = a.nvrtcGetNumSupportedArchs(&count); r != 0 || count < 0 || count > 1024) {
    return make_error(ErrorKind::nvrtc, "nvrtc " + used + ": nvrtcGetNumSupportedArchs failed: " + n->describe(r), r);
  }
  std::vector<int> archs(static_cast<std::size_t>(count));
  if (count > 0) {
    if (int r = a.nvrtcGetSupportedArchs(archs.data()); r != 0) {
      return make_error(ErrorKind::nvrtc, "nvrtc " + used + ": nvrtcGetSupportedArchs failed: " + n->describe(r), r);
    }
  }
  for (int v : archs) {
    if (v > 0) info.supported.push_back(static_cast<unsigned>(v));
  }
  std::sort(info.supported.begin(), info.supported.end());
  BuildIdSearch search;
  std::memcpy(&search.addr, &a.nvrtcVersion, sizeof search.addr);
  ::dl_iterate_phdr(find_build_id, &search);
  info.build_id = search.id;
  Dl_info dl{};
  info.library = (::dladdr(search.addr, &dl) != 0 && dl.dli_fname != nullptr) ? dl.dli_fname : used;
  if (const ReleaseRow* rel = find_release(info.version)) info.ptx_isa = rel->ptx_isa;
  return NvrtcPtr(std::move(n));
}

Result<NvrtcPtr> shared_nvrtc() {
  static std::once_flag once;
  static Result<NvrtcPtr>* cached = nullptr;
  std::call_once(once, [] { cached = new Result<NvrtcPtr>(load_nvrtc()); });  // kept for the process
  return *cached;
}

const NvrtcInfo& nvrtc_info(const Nvrtc& nvrtc) { return nvrtc.info(); }

Result<NvrtcInfo> read_nvrtc_info(const std::string& library) {
  AG_TRY(NvrtcPtr nvrtc, load_nvrtc(library));
  NvrtcInfo info = nvrtc->info();
  // No NVRTC function is running or referred to: the entry points leave with the object. The
  // handle is this call's own reference (dlopen counts them), so a shared_nvrtc() stays loaded.
  void* handle = nvrtc->handle_;
  nvrtc.reset();
#if defined(__SANITIZE_ADDRESS__)
  // Kept under AddressSanitizer: NVRTC allocates its C++ runtime's exception pool (72,704 bytes)
  // when it is loaded and leaves it when it is unloaded, which LeakSanitizer reports as a leak
  // without a module to suppress it by.
  (void)handle;
#else
  if (handle != nullptr) ::dlclose(handle);
#endif
  return info;
}

Result<Nvrtc::Output> Nvrtc::compile(const CompileRequest& request, const std::vector<std::string>& options) const {
  const NvrtcApi& a = api_;
  std::vector<const char*> hdr_src, hdr_names, opts;
  for (const Header& h : request.headers) {
    hdr_src.push_back(h.content.c_str());
    hdr_names.push_back(h.name.c_str());
  }
  for (const std::string& o : options) opts.push_back(o.c_str());
  const std::string what = "nvrtc: " + request.name;
  NvrtcApi::Program prog = nullptr;
  if (int r = a.nvrtcCreateProgram(&prog, request.source.c_str(), request.name.c_str(),
                                   static_cast<int>(hdr_src.size()), hdr_src.data(), hdr_names.data());
      r != 0) {
    return make_error(ErrorKind::nvrtc, what + ": nvrtcCreateProgram failed: " + describe(r), r);
  }
  struct Destroy {
    const NvrtcApi& a;
    NvrtcApi::Program& p;
    ~Destroy() { a.nvrtcDestroyProgram(&p); }
  } destroy{a, prog};

  for (const std::string& e : request.name_expressions) {
    if (int r = a.nvrtcAddNameExpression(prog, e.c_str()); r != 0) {
      return make_error(ErrorKind::nvrtc, what + ": name expression '" + e + "': " + describe(r), r);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = a.nvrtcCompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  const auto t1 = std::chrono::steady_clock::now();
  Output out;
  out.ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  std::size_t log_size = 0;
  if (a.nvrtcGetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
    std::string log(log_size, '\0');
    if (a.nvrtcGetProgramLog(prog, log.data()) == 0) {
      log.resize(std::strlen(log.c_str()));
      while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
      out.log = std::move(log);
    }
  }
  const std::string arch = [&] {
    for (const std::string& o : options) {
      if (o.rfind("-arch=", 0) == 0) return o.substr(6);
    }
    return std::string("the default architecture");
  }();
  if (rc != 0) {
    std::string msg = what + ": compiling for " + arch + " failed: " + describe(rc) + "\noptions: " +
                      join_options(options) + "\nlog:\n" + (out.log.empty() ? "(empty)" : out.log);
    const std::string lines = quoted_lines(out.log, request.name, request.source);
    if (!lines.empty()) msg += "\nsource lines:\n" + lines.substr(0, lines.size() - 1);
    return make_error(ErrorKind::nvrtc, std::move(msg), rc);
  }
  auto fetch = [&](int (*size_fn)(NvrtcApi::Program, std::size_t*), int (*get_fn)(NvrtcApi::Program, char*),
                   const char* kind) -> Status {
    std::size_t n = 0;
    if (int r = size_fn(prog, &n); r != 0) return make_error(ErrorKind::nvrtc, what + ": getting the " + kind + " size: " + describe(r), r);
    std::vector<std::byte> buf(n);
    if (n > 0) {
      if (int r = get_fn(prog, reinterpret_cast<char*>(buf.data())); r != 0) {
        return make_error(ErrorKind::nvrtc, what + ": getting the " + kind + ": " + describe(r), r);
      }
    }
    out.image = std::move(buf);
    return Ok{};
  };
  const bool dlto = std::find(options.begin(), options.end(), "-dlto") != options.end() ||
                    std::find(options.begin(), options.end(), "--dlink-time-opt") != options.end();
  Status got = Ok{};
  if (dlto) {
    if (a.nvrtcGetLTOIRSize == nullptr) return make_error(ErrorKind::unsupported, what + ": this nvrtc cannot return LTO-IR");
    got = fetch(a.nvrtcGetLTOIRSize, a.nvrtcGetLTOIR, "LTO-IR");
  } else if (arch.rfind("sm_", 0) == 0) {
    got = fetch(a.nvrtcGetCUBINSize, a.nvrtcGetCUBIN, "cubin");
  } else {
    got = fetch(a.nvrtcGetPTXSize, a.nvrtcGetPTX, "PTX");
    while (!out.image.empty() && out.image.back() == std::byte{0}) out.image.pop_back();
  }
  if (!got) return got.error();
  if (out.image.empty()) return make_error(ErrorKind::nvrtc, what + ": nvrtc produced an empty image for " + arch);
  for (const std::string& e : request.name_expressions) {
    const char* lowered = nullptr;
    if (int r = a.nvrtcGetLoweredName(prog, e.c_str(), &lowered); r != 0 || lowered == nullptr) {
      return make_error(ErrorKind::nvrtc, what + ": lowered name of '" + e + "': " + describe(r), r);
    }
    out.lowered.emplace_back(e, lowered);
  }
  return out;
}

}  // namespace archguard::jit
