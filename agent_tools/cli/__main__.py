from agent_tools.cli import main

main()
