// Happens-before edges that ThreadSanitizer cannot see: a message through CAF's mailboxes and
// scheduler, whose synchronization lives in the prebuilt, uninstrumented libcaf_core. The side
// that hands memory over calls publish(key) before sending; the side that takes it calls
// observe(key) when it handles the message; `key` is an address both sides hold (the request,
// the bucket; null: no edge). Under -fsanitize=thread they are __tsan_release / __tsan_acquire;
// otherwise they compile to nothing. They add no synchronization: they tell TSan of a real one.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define CHORUS_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CHORUS_TSAN 1
#endif
#endif

#ifdef CHORUS_TSAN
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace chorus::tsan_edge {

/// What this thread did so far happens before whatever follows an observe(key) elsewhere.
inline void publish([[maybe_unused]] const void* key) {
#ifdef CHORUS_TSAN
  if (key) __tsan_release(const_cast<void*>(key));
#endif
}

/// Everything before the publish(key) calls seen so far happens before what this thread does next.
inline void observe([[maybe_unused]] const void* key) {
#ifdef CHORUS_TSAN
  if (key) __tsan_acquire(const_cast<void*>(key));
#endif
}

}  // namespace chorus::tsan_edge
