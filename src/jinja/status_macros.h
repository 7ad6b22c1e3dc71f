// Early returns for Status and Result<T> (the module's code returns errors, never throws).
#pragma once

#define JINJA_CONCAT_INNER_(a, b) a##b
#define JINJA_CONCAT_(a, b) JINJA_CONCAT_INNER_(a, b)

// `lhs = *expr`, or return expr's error.
#define JINJA_ASSIGN_OR_RETURN(lhs, expr) \
  JINJA_ASSIGN_OR_RETURN_IMPL_(JINJA_CONCAT_(jinja_result_, __LINE__), lhs, expr)
#define JINJA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(*tmp)

#define JINJA_RETURN_IF_ERROR(expr)                                                         \
  do {                                                                                      \
    if (::kvgate::Status jinja_status_ = (expr); !jinja_status_.ok()) return jinja_status_; \
  } while (0)
