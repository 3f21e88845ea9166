# Run at install time (cmake --install, and cpack with the prefix /usr): installs the systemd units
# with the paths this install uses filled in, and the commented config files.
#   CMAKE_INSTALL_PREFIX  the prefix being installed to (--prefix, or cpack's /usr)
#   IMHASH_DEPLOY_DIR     deploy/ in the source tree; IMHASH_STAGING_DIR: where the units are made
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(sysconf /etc)  # GNU's rule (GNUInstallDirs): the prefix /usr keeps its config in /etc
else()
  set(sysconf "${CMAKE_INSTALL_PREFIX}/etc")
endif()
set(IMHASH_BINDIR "${CMAKE_INSTALL_PREFIX}/bin")
set(IMHASH_CONFDIR "${sysconf}/imhash")
set(IMHASH_DOCDIR "${CMAKE_INSTALL_PREFIX}/share/doc/imhash")

foreach(unit imhash-config.service imhash-hash@.service imhash-login.service)
  configure_file("${IMHASH_DEPLOY_DIR}/systemd/${unit}.in" "${IMHASH_STAGING_DIR}/${unit}" @ONLY)
  file(INSTALL "${IMHASH_STAGING_DIR}/${unit}"
       DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system")
endforeach()

# An operator's edited config file is never overwritten by `cmake --install` (the .deb has dpkg's
# conffile handling for that); the new one is installed beside it as FILE.new.
foreach(conf config_server.conf hash_server.conf login_server.conf)
  set(target "$ENV{DESTDIR}${IMHASH_CONFDIR}/${conf}")
  if(EXISTS "${target}")
    execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${IMHASH_DEPLOY_DIR}/etc/${conf}"
                            "${target}" RESULT_VARIABLE differs)
    if(differs)
      message(STATUS "Kept: ${target} (edited); the new one is ${target}.new")
      file(INSTALL "${IMHASH_DEPLOY_DIR}/etc/${conf}" DESTINATION "${IMHASH_CONFDIR}"
           RENAME "${conf}.new")
      continue()
    endif()
  endif()
  file(INSTALL "${IMHASH_DEPLOY_DIR}/etc/${conf}" DESTINATION "${IMHASH_CONFDIR}")
endforeach()
