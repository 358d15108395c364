// SPDX-License-Identifier: Apache-2.0
// Primary context, modules, launches, memory and events over the dlopen()ed driver.
#include "device/driver_api.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

namespace archguard::device {
namespace {

// Logs come back NUL-terminated inside a fixed buffer; trim the terminator and trailing blanks.
std::string trim_log(const std::vector<char>& buf) {
  std::string s(buf.data(), ::strnlen(buf.data(), buf.size()));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

void* as_option_value(std::size_t v) {
  // The driver reads size options out of the pointer-sized slot itself.
  void* p = nullptr;
  static_assert(sizeof(std::uintptr_t) == sizeof(void*));
  const auto u = static_cast<std::uintptr_t>(v);
  std::memcpy(&p, &u, sizeof p);
  return p;
}

/// Move assignment through the move constructor: a temporary takes o's handle, swaps its
/// `members` with ours and releases ours when it goes out of scope.
template <class T, class... Members>
T& move_assign(T& self, T&& o, Members T::*... members) noexcept {
  T old(std::move(o));
  (std::swap(self.*members, old.*members), ...);
  return self;
}

/// The error of a copy of `bytes` bytes that does not fit a buffer of `size`.
Error exceeds_buffer(const char* api, std::size_t bytes, std::size_t size) {
  return make_error(ErrorKind::driver,
                    std::string(api) + ": " + std::to_string(bytes) + " bytes exceed the buffer of " + std::to_string(size),
                    kCuErrorInvalidValue);
}

}  // namespace

// ---- Context ------------------------------------------------------------------------------

Result<Context> Context::primary(DriverPtr driver, int ordinal) {
  if (!driver) return make_error(ErrorKind::driver, "no cuda driver: null driver", kNoDriverCode);
  AG_TRY(auto info, driver->device(ordinal));
  const DriverApi& a = driver->api();
  CUdevice dev = 0;
  AG_TRY_STATUS(driver->check("cuDeviceGet", a.cuDeviceGet(&dev, ordinal)));
  ContextHandle ctx = nullptr;
  const std::string where = "device " + std::to_string(ordinal) + " (" + info.name + "): ";
  if (auto s = driver->check(where + "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain(&ctx, dev)); !s) {
    return s.error();
  }
  Context c(std::move(driver), std::move(info), dev, ctx);
  AG_TRY_STATUS(c.make_current());  // c releases the retain on return
  return c;
}

Context::Context(Context&& o) noexcept
    : driver_(std::move(o.driver_)), info_(std::move(o.info_)), device_(o.device_), ctx_(o.ctx_) {
  o.ctx_ = nullptr;
}

Context& Context::operator=(Context&& o) noexcept {
  return move_assign(*this, std::move(o), &Context::driver_, &Context::info_, &Context::device_, &Context::ctx_);
}

Context::~Context() {
  if (ctx_ != nullptr && driver_) {
    (void)driver_->api().cuDevicePrimaryCtxRelease(device_);
    ctx_ = nullptr;
  }
}

Status Context::make_current() const {
  return driver_->check("cuCtxSetCurrent", driver_->api().cuCtxSetCurrent(ctx_));
}

Status Context::synchronize() const {
  return driver_->check("cuCtxSynchronize", driver_->api().cuCtxSynchronize());
}

Result<Module> Context::load_module(std::span<const std::byte> image, const LoadOptions& options) const {
  if (image.empty()) return make_error(ErrorKind::driver, "cuModuleLoadDataEx: empty image", kCuErrorInvalidValue);
  // PTX must be NUL-terminated; cubins and fatbins carry their own sizes, so an extra zero
  // byte after them is harmless. Copy only when the terminator is missing.
  std::vector<std::byte> owned;
  const void* data = image.data();
  if (image.back() != std::byte{0}) {
    owned.assign(image.begin(), image.end());
    owned.push_back(std::byte{0});
    data = owned.data();
  }
  const std::size_t n = std::max<std::size_t>(options.log_bytes, 256);
  std::vector<char> info(n, '\0'), err(n, '\0');
  int keys[5] = {kJitInfoLogBuffer, kJitInfoLogBufferSizeBytes, kJitErrorLogBuffer,
                 kJitErrorLogBufferSizeBytes, kJitLogVerbose};
  void* values[5] = {info.data(), as_option_value(n), err.data(), as_option_value(n),
                     as_option_value(options.verbose_log ? 1 : 0)};
  ModuleHandle mod = nullptr;
  const int r = driver_->api().cuModuleLoadDataEx(&mod, data, 5, keys, values);
  if (r != kCuSuccess) {
    Error e = driver_->error("cuModuleLoadDataEx", r);
    const std::string log = trim_log(err);
    if (!log.empty()) e.message += "; jit log: " + log;
    return e;
  }
  return Module(driver_, mod, trim_log(info));
}

Result<Buffer> Context::allocate(std::size_t bytes) const {
  CUdeviceptr p = 0;
  if (auto s = driver_->check("cuMemAlloc(" + std::to_string(bytes) + " bytes)",
                              driver_->api().cuMemAlloc(&p, bytes));
      !s) {
    return s.error();
  }
  return Buffer(driver_, static_cast<DevicePtr>(p), bytes);
}

Result<Event> Context::create_event() const {
  EventHandle ev = nullptr;
  AG_TRY_STATUS(driver_->check("cuEventCreate", driver_->api().cuEventCreate(&ev, 0)));
  return Event(driver_, ev);
}

// ---- Module / Function --------------------------------------------------------------------

Module::Module(Module&& o) noexcept
    : driver_(std::move(o.driver_)), mod_(o.mod_), info_log_(std::move(o.info_log_)) {
  o.mod_ = nullptr;
}

Module& Module::operator=(Module&& o) noexcept {
  return move_assign(*this, std::move(o), &Module::driver_, &Module::mod_, &Module::info_log_);
}

Module::~Module() {
  if (mod_ != nullptr && driver_) (void)driver_->api().cuModuleUnload(mod_);
  mod_ = nullptr;
}

Result<Function> Module::function(const std::string& name) const {
  FunctionHandle fn = nullptr;
  if (auto s = driver_->check("cuModuleGetFunction(" + name + ")",
                              driver_->api().cuModuleGetFunction(&fn, mod_, name.c_str()));
      !s) {
    return s.error();
  }
  return Function(driver_.get(), fn, name);
}

Status Function::launch(Dim3 grid, Dim3 block, void** args, unsigned shared_bytes, StreamHandle stream) const {
  if (driver_ == nullptr || fn_ == nullptr) return make_error(ErrorKind::driver, "cuLaunchKernel: no function", kCuErrorInvalidValue);
  return driver_->check("cuLaunchKernel(" + name_ + ")",
                        driver_->api().cuLaunchKernel(fn_, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                                      shared_bytes, stream, args, nullptr));
}

Result<int> Function::attribute(int attribute) const {
  if (driver_ == nullptr || fn_ == nullptr) return make_error(ErrorKind::driver, "cuFuncGetAttribute: no function", kCuErrorInvalidValue);
  int v = 0;
  if (auto s = driver_->check("cuFuncGetAttribute(" + name_ + ")",
                              driver_->api().cuFuncGetAttribute(&v, attribute, fn_));
      !s) {
    return s.error();
  }
  return v;
}

// ---- Buffer -------------------------------------------------------------------------------

Buffer::Buffer(Buffer&& o) noexcept : driver_(std::move(o.driver_)), ptr_(o.ptr_), size_(o.size_) {
  o.ptr_ = 0;
  o.size_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  return move_assign(*this, std::move(o), &Buffer::driver_, &Buffer::ptr_, &Buffer::size_);
}

Buffer::~Buffer() {
  if (ptr_ != 0 && driver_) (void)driver_->api().cuMemFree(ptr_);
  ptr_ = 0;
}

Status Buffer::copy_from_host(std::span<const std::byte> src) const {
  if (src.size() > size_) {
    return exceeds_buffer("cuMemcpyHtoD", src.size(), size_);
  }
  return driver_->check("cuMemcpyHtoD", driver_->api().cuMemcpyHtoD(ptr_, src.data(), src.size()));
}

Status Buffer::copy_to_host(std::span<std::byte> dst) const {
  if (dst.size() > size_) {
    return exceeds_buffer("cuMemcpyDtoH", dst.size(), size_);
  }
  return driver_->check("cuMemcpyDtoH", driver_->api().cuMemcpyDtoH(dst.data(), ptr_, dst.size()));
}

Status Buffer::fill(std::uint8_t value) const {
  return driver_->check("cuMemsetD8", driver_->api().cuMemsetD8(ptr_, value, size_));
}

// ---- Event --------------------------------------------------------------------------------

Event::Event(Event&& o) noexcept : driver_(std::move(o.driver_)), ev_(o.ev_) { o.ev_ = nullptr; }

Event& Event::operator=(Event&& o) noexcept {
  return move_assign(*this, std::move(o), &Event::driver_, &Event::ev_);
}

Event::~Event() {
  if (ev_ != nullptr && driver_) (void)driver_->api().cuEventDestroy(ev_);
  ev_ = nullptr;
}

Status Event::record(StreamHandle stream) const {
  return driver_->check("cuEventRecord", driver_->api().cuEventRecord(ev_, stream));
}

Status Event::synchronize() const {
  return driver_->check("cuEventSynchronize", driver_->api().cuEventSynchronize(ev_));
}

Result<float> Event::elapsed_since(const Event& start) const {
  float ms = 0.0f;
  if (auto s = driver_->check("cuEventElapsedTime", driver_->api().cuEventElapsedTime(&ms, start.ev_, ev_)); !s) {
    return s.error();
  }
  return ms;
}

}  // namespace archguard::device
