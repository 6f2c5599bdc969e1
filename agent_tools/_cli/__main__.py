from agent_tools._cli import main

main()
