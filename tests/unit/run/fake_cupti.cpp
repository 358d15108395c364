// SPDX-License-Identifier: Apache-2.0
// A stand-in for libcupti.so used by archguard run's tests on machines without a GPU: the
// subscription API the recorder calls, plus two hooks through which the fake program
// (fake_run_app.cpp) plays the driver and delivers callbacks as CUPTI would. Controlled by
// FAKE_CUPTI_BUSY=1: the subscription is refused as when another tool (Nsight) holds CUPTI.
#include <cupti.h>

#include <cstdlib>
#include <cstring>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
CUpti_CallbackFunc g_callback = nullptr;
void* g_userdata = nullptr;
bool g_enabled[4][1024] = {};
int g_subscribed = 0;
}  // namespace

FAKE_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                          void* userdata, CUpti_SubscriberParams* params) {
  const char* busy = std::getenv("FAKE_CUPTI_BUSY");
  if ((busy != nullptr && *busy == '1') || g_subscribed != 0) {
    if (params != nullptr && params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0)
      std::strncpy(params->oldSubscriberName, "Nsight Systems", params->oldSubscriberSize - 1);
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  g_callback = callback;
  g_userdata = userdata;
  g_subscribed = 1;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_subscribed);
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback, void* userdata) {
  return cuptiSubscribe_v2(subscriber, callback, userdata, nullptr);
}
FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  g_subscribed = 0;
  g_callback = nullptr;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle, CUpti_CallbackDomain domain,
                                            CUpti_CallbackId cbid) {
  if (domain <= 0 || domain >= 4 || cbid >= 1024) return CUPTI_ERROR_INVALID_PARAMETER;
  g_enabled[domain][cbid] = enable != 0;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult r, const char** text) {
  *text = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR (fake)";
  return CUPTI_SUCCESS;
}

/// The fake program's hook: an API callback (enter or exit) as CUPTI delivers it.
FAKE_EXPORT int fake_cupti_api(int domain, unsigned cbid, int site, const char* name, const void* params,
                               void* return_value, void* context) {
  if (g_callback == nullptr || domain <= 0 || domain >= 4 || cbid >= 1024 || !g_enabled[domain][cbid]) return 0;
  CUpti_CallbackData data{};
  data.callbackSite = site == 0 ? CUPTI_API_ENTER : CUPTI_API_EXIT;
  data.functionName = name;
  data.functionParams = params;
  data.functionReturnValue = return_value;
  data.context = static_cast<CUcontext>(context);
  g_callback(g_userdata, static_cast<CUpti_CallbackDomain>(domain), cbid, &data);
  return 1;
}

/// The fake program's hook: the resource callback of a loaded module.
FAKE_EXPORT int fake_cupti_module(void* context, unsigned id, const void* cubin, size_t size) {
  if (g_callback == nullptr || !g_enabled[CUPTI_CB_DOMAIN_RESOURCE][CUPTI_CBID_RESOURCE_MODULE_LOADED]) return 0;
  CUpti_ModuleResourceData m{};
  m.moduleId = id;
  m.cubinSize = size;
  m.pCubin = static_cast<const char*>(cubin);
  CUpti_ResourceData rd{};
  rd.context = static_cast<CUcontext>(context);
  rd.resourceDescriptor = &m;
  g_callback(g_userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &rd);
  return 1;
}
