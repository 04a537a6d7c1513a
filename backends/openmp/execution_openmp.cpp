// OpenMP: there is nothing to capture; recorded work runs again on replay, and side work runs
// in line.
#include "../execution.hpp"

#include <unistd.h>

#include "dqntrader/core/error.hpp"

namespace dqntrader::exec {

struct StreamSpace::Impl {
  ExecSpace space;
};

StreamSpace::StreamSpace() : m_impl(std::make_unique<Impl>()) {}
StreamSpace::~StreamSpace() = default;
const ExecSpace& StreamSpace::space() const {
  return m_impl->space;
}

// The side is the default instance too: work runs in the order it is enqueued, so there is
// nothing to order.
struct SideStream::Impl {
  ExecSpace space;
};

SideStream::SideStream() : m_impl(std::make_unique<Impl>()) {}
SideStream::~SideStream() = default;
const ExecSpace& SideStream::space() const {
  return m_impl->space;
}
void SideStream::fork(const ExecSpace&) const {}
void SideStream::join(const ExecSpace&) const {}

struct CapturedWork::Impl {
  std::function<void()> work;
};

CapturedWork::CapturedWork() : m_impl(std::make_unique<Impl>()) {}
CapturedWork::~CapturedWork() = default;

void CapturedWork::capture(const ExecSpace&, const std::function<void()>& enqueue) {
  m_impl->work = enqueue;
}

void CapturedWork::replay(const ExecSpace&) const {
  if (!m_impl->work)
    throw Error("CapturedWork::replay before capture");
  m_impl->work();
}

void CapturedWork::clear() {
  m_impl = std::make_unique<Impl>();
}

bool CapturedWork::captured() const {
  return static_cast<bool>(m_impl->work);
}

std::size_t CapturedWork::kernels() const {
  return 0;
}

std::size_t free_memory() {
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(size)
                               : 0;
}

int device_count() {
  return 1;
}

}  // namespace dqntrader::exec
