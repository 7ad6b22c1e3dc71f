# `cmake --install build/release [--prefix P]`: the binaries, a systemd unit that runs kvgate
# from an environment file, and an example of that file.
#
#   P/bin/kvgate, kvgate-mock, kvgate-replay, kvgate-events, kvgate-corpus
#   P/lib/systemd/system/kvgate.service   (ExecStart names P/bin/kvgate)
#   P/share/doc/kvgate/kvgate.env.example (copy to /etc/kvgate/kvgate.env)
include(GNUInstallDirs)

foreach(t kvgate kvgate-mock kvgate-replay kvgate-events kvgate-corpus)
  if(TARGET ${t})
    install(TARGETS ${t} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# The unit is written at install time so that its ExecStart follows --prefix.
set(_unit_template "${PROJECT_SOURCE_DIR}/tools/systemd/kvgate.service.in")
install(CODE "
  set(_prefix \"\${CMAKE_INSTALL_PREFIX}\")
  file(READ \"${_unit_template}\" _unit)
  string(REPLACE \"@KVGATE_BINDIR@\" \"\${_prefix}/${CMAKE_INSTALL_BINDIR}\" _unit \"\${_unit}\")
  set(_dest \"\$ENV{DESTDIR}\${_prefix}/lib/systemd/system\")
  file(MAKE_DIRECTORY \"\${_dest}\")
  file(WRITE \"\${_dest}/kvgate.service\" \"\${_unit}\")
  message(STATUS \"Installing: \${_dest}/kvgate.service\")
")
install(FILES "${PROJECT_SOURCE_DIR}/tools/systemd/kvgate.env"
        DESTINATION ${CMAKE_INSTALL_DOCDIR} RENAME kvgate.env.example)
