# Writes OUT as `#define TILEMIX_GIT_SHA "<git describe>"`, touching it only when the text
# changes: run at every build, so an incremental build never reports a stale sha.
execute_process(COMMAND git describe --always --dirty --abbrev=12 --match=NONE
  WORKING_DIRECTORY ${SOURCE_DIR} OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT sha)
  set(sha unknown)
endif()
set(text "#define TILEMIX_GIT_SHA \"${sha}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
