# Included from chain/CMakeLists.txt (CMAKE_CURRENT_SOURCE_DIR is chain/).
# The arbitration contract is compiled at build time with the pinned solc-js
# and embedded into the chain library as C strings (generated/ovt_arbitration_code.c), so
# `ovt deploy` needs no node.js at run time.
if(NOT OVT_SOLCJS)
  message(FATAL_ERROR "solcjs not found in ${OVT_NODE_BIN}: run `npm ci` in ${CMAKE_SOURCE_DIR} "
                      "(it installs the pinned solc-js, anvil and cast from package-lock.json)")
endif()
set(OVT_CONTRACT_SOL chain/contracts/OvtArbitration.sol)
set(OVT_SOLC_OUT ${CMAKE_BINARY_DIR}/solc)
set(OVT_SOLC_STEM ${OVT_SOLC_OUT}/chain_contracts_OvtArbitration_sol_OvtArbitration)
set(OVT_CONTRACT_C ${CMAKE_BINARY_DIR}/generated/ovt_arbitration_code.c)
add_custom_command(
  OUTPUT ${OVT_CONTRACT_C} ${OVT_SOLC_STEM}.bin ${OVT_SOLC_STEM}.abi
  COMMAND ${CMAKE_COMMAND} -E rm -rf ${OVT_SOLC_OUT}
  COMMAND ${OVT_SOLCJS} --bin --abi --optimize --optimize-runs 1000
          --base-path ${CMAKE_SOURCE_DIR} -o ${OVT_SOLC_OUT} ${OVT_CONTRACT_SOL}
  COMMAND ${CMAKE_COMMAND} -DBIN=${OVT_SOLC_STEM}.bin -DABI=${OVT_SOLC_STEM}.abi
          -DOUT=${OVT_CONTRACT_C} -DPREFIX=chain_arb -P ${CMAKE_CURRENT_SOURCE_DIR}/contracts/embed.cmake
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}
  DEPENDS ${CMAKE_SOURCE_DIR}/${OVT_CONTRACT_SOL} ${CMAKE_CURRENT_SOURCE_DIR}/contracts/embed.cmake
  COMMENT "Compiling ${OVT_CONTRACT_SOL} with solcjs (optimizer on) and embedding it"
  VERBATIM)
target_sources(ovt_chain PRIVATE ${OVT_CONTRACT_C})
